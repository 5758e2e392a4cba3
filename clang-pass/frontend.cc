// SPDX-License-Identifier: MIT
// frontend.cc - the clang half of ftpad-clang.so: reads the plugin's
// arguments (-fplugin-arg-ftpad-clang-KEY=VALUE), defines the ftpad(before,
// after) attribute, and tells the pass which functions are
// no_instrument_function.  Clang leaves no trace of that attribute in the
// IR, so only the frontend can see it.
#include "ftpad-clang.h"
#include "policy.h"

#include <dlfcn.h>
#include <stdlib.h>


#include "clang/AST/ASTConsumer.h"
#include "clang/AST/Mangle.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Basic/TargetInfo.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendPluginRegistry.h"
#include "clang/Sema/ParsedAttr.h"
#include "clang/Sema/Sema.h"
#include "llvm/ADT/Triple.h"

using namespace clang;

namespace {

// Layouts from ftpad attributes, by the function's first declaration;
// the consumer turns them into names once the whole file is parsed.
std::map<const Decl *, ftpad_layout> &attributed()
{
	static std::map<const Decl *, ftpad_layout> m;
	return m;
}

void report(DiagnosticsEngine &d, DiagnosticsEngine::Level level, SourceLocation loc,
	    const std::string &msg)
{
	d.Report(loc, d.getCustomDiagID(level, "ftpad: %0")) << msg;
}

void error(DiagnosticsEngine &d, SourceLocation loc, const std::string &msg)
{
	report(d, DiagnosticsEngine::Error, loc, msg);
}

std::string no_layout(const llvm::Triple &t)
{
	return "no pad layout for target " + t.str() + " (x86_64 and aarch64 only)";
}

struct FtpadAttrInfo : ParsedAttrInfo {
	FtpadAttrInfo()
	{
		static const Spelling spellings[] = {{ParsedAttr::AS_GNU, "ftpad"}};
		NumArgs = 2;
		Spellings = spellings;
	}

	bool diagAppertainsToDecl(Sema &S, const ParsedAttr &A, const Decl *D) const override
	{
		if (isa<FunctionDecl>(D))
			return true;
		error(S.getDiagnostics(), A.getLoc(), "the ftpad attribute only applies to functions");
		return false;
	}

	AttrHandling handleDeclAttribute(Sema &S, Decl *D, const ParsedAttr &A) const override
	{
		unsigned v[2];
		std::string name = cast<FunctionDecl>(D)->getNameAsString();
		for (unsigned i = 0; i < 2; i++) {
			// A bare identifier arrives as an identifier, not an
			// expression: clang guesses it might name a parameter.
			Expr *e = A.isArgExpr(i) ? A.getArgAsExpr(i) : nullptr;
			Optional<llvm::APSInt> n;
			if (e && !e->isValueDependent())
				n = e->getIntegerConstantExpr(S.Context);
			if (!n || n->isNegative() || n->getActiveBits() > 16) {
				error(S.getDiagnostics(), A.getLoc(),
				      "ftpad(before, after) on '" + name +
					      "' needs two small integer constants");
				return AttributeNotApplied;
			}
			v[i] = n->getZExtValue();
		}
		const llvm::Triple &triple = S.Context.getTargetInfo().getTriple();
		const FtpadArch *arch = ftpad_arch_for(triple);
		std::string why = arch ? ftpad_layout_problem(ftpad_config(), *arch, v[0], v[1])
				       : no_layout(triple);
		if (!why.empty()) {
			error(S.getDiagnostics(), A.getLoc(), "ftpad attribute on '" + name + "': " + why);
			return AttributeNotApplied;
		}
		attributed()[D->getCanonicalDecl()] = {v[0], v[1]};
		return AttributeApplied;
	}
};

// Every name a function is emitted under (a C++ constructor has several).
std::vector<std::string> emitted_names(ASTNameGenerator &gen, const FunctionDecl *fd)
{
	if (isa<CXXConstructorDecl>(fd) || isa<CXXDestructorDecl>(fd))
		return gen.getAllManglings(fd);
	return {gen.getName(fd)};
}

struct Collector : RecursiveASTVisitor<Collector> {
	ASTNameGenerator gen;
	DiagnosticsEngine &diags;
	Collector(ASTContext &ctx, DiagnosticsEngine &d) : gen(ctx), diags(d) {}
	bool shouldVisitTemplateInstantiations() const { return true; }

	bool VisitFunctionDecl(FunctionDecl *fd)
	{
		if (fd->isDependentContext())
			return true;
		// An instance of a template has the attribute of its pattern.
		const FunctionDecl *pattern = fd->getTemplateInstantiationPattern();
		auto a = attributed().find((pattern ? pattern : fd)->getCanonicalDecl());
		bool has_ftpad = a != attributed().end();
		const char *skip = nullptr;
		if (fd->hasAttr<NoInstrumentFunctionAttr>()) {
			skip = "no_instrument_function";
		} else if (fd->hasAttr<PatchableFunctionEntryAttr>()) {
			skip = "user patchable_function_entry";
			if (has_ftpad && fd->doesThisDeclarationHaveABody())
				report(diags, DiagnosticsEngine::Warning, fd->getLocation(),
				       "ftpad attribute on '" + fd->getNameAsString() +
					       "' ignored: its patchable_function_entry attribute wins");
		}
		if (!has_ftpad && !skip)
			return true;
		FtpadConfig &c = ftpad_config();
		for (const std::string &n : emitted_names(gen, fd)) {
			if (skip)
				c.skip[n] = skip;
			else
				c.attribute[n] = a->second;
		}
		return true;
	}
};

// Runs before CodeGen's consumer, so the names are known before the pass
// runs at the end of CodeGen's HandleTranslationUnit.
struct Consumer : ASTConsumer {
	DiagnosticsEngine &diags;
	explicit Consumer(DiagnosticsEngine &d) : diags(d) {}
	void HandleTranslationUnit(ASTContext &ctx) override
	{
		Collector(ctx, diags).TraverseDecl(ctx.getTranslationUnitDecl());
	}
};

// One argument as given, cut into KEY and VALUE.  The driver cuts
// -fplugin-arg-ftpad-clang-before=3 at the first dash after the plugin's
// name, so it arrives as "clang-before=3"; the GCC plugin's spelling,
// -fplugin-arg-ftpad-before=3, arrives as "before=3" and means the same.
struct Arg {
	std::string flag, key, value;
	bool has_value;
	explicit Arg(const std::string &a) : flag("-fplugin-arg-ftpad-" + a)
	{
		std::string s = a.rfind("clang-", 0) == 0 ? a.substr(6) : a;
		size_t eq = s.find('=');
		has_value = eq != std::string::npos;
		key = s.substr(0, eq);
		value = has_value ? s.substr(eq + 1) : "";
	}
};

// The core's messages, as clang's diagnostics.
struct Diagnostics {
	DiagnosticsEngine &d;
	FtpadConfig &c;
	const FtpadArch &arch;
	std::string problem; // the last after_problem()

	static void bad_argument(void *ctx, const char *flag, const char *why)
	{
		error(static_cast<Diagnostics *>(ctx)->d, SourceLocation(),
		      std::string("bad argument ") + flag + ": " + why);
	}

	static void unknown_argument(void *ctx, const char *flag)
	{
		error(static_cast<Diagnostics *>(ctx)->d, SourceLocation(),
		      std::string("unknown argument ") + flag + " (docs/clang-pass.md)");
	}

	static void message(void *ctx, const char *text)
	{
		error(static_cast<Diagnostics *>(ctx)->d, SourceLocation(), text);
	}

	// A policy rule's after=N that needs what this compile lacks.
	static const char *after_problem(void *ctx, const ftpad_options *, unsigned after)
	{
		auto *self = static_cast<Diagnostics *>(ctx);
		self->problem = ftpad_layout_problem(self->c, self->arch, 0, after);
		return self->problem.empty() ? nullptr : self->problem.c_str();
	}
};

// Every argument is checked by the core, and each bad one named, before
// clang stops.
bool parse_args(const std::vector<std::string> &args, FtpadConfig &c, const FtpadArch &arch,
		DiagnosticsEngine &d)
{
	Diagnostics diagnostics = {d, c, arch, ""};
	const ftpad_diag diag = {&diagnostics, Diagnostics::bad_argument,
				 Diagnostics::unknown_argument, Diagnostics::message,
				 Diagnostics::after_problem};
	std::vector<Arg> parsed(args.begin(), args.end());
	std::vector<ftpad_arg> core_args;
	for (const Arg &a : parsed)
		core_args.push_back({a.key.c_str(), a.has_value ? a.value.c_str() : nullptr,
				     a.flag.c_str()});
	ftpad_options_init(&c.opts, arch.layout);
	if (!ftpad_parse_arguments(&c.opts, core_args.data(), core_args.size(), &diag))
		return false;
	std::string why = ftpad_layout_problem(c, arch, c.opts.layout.before, c.opts.layout.after);
	if (!why.empty()) {
		error(d, SourceLocation(), why);
		return false;
	}
	return true;
}

// Does this compile generate code, where the plugin's code generator hook
// runs?  Not when it writes IR for a later code generator.
bool generates_code(const CompilerInstance &ci)
{
	const CodeGenOptions &cg = ci.getCodeGenOpts();
	frontend::ActionKind action = ci.getFrontendOpts().ProgramAction;
	return !cg.PrepareForLTO && !cg.PrepareForThinLTO && action != frontend::EmitBC &&
	       action != frontend::EmitLLVM;
}

// The path this shared object was loaded from.
std::string own_path()
{
	Dl_info info;
	if (!dladdr(reinterpret_cast<void *>(&own_path), &info) || !info.dli_fname)
		return "";
	return info.dli_fname;
}

bool same_file(const std::string &a, const std::string &b)
{
	char ra[PATH_MAX], rb[PATH_MAX];
	return realpath(a.c_str(), ra) && realpath(b.c_str(), rb) && !strcmp(ra, rb);
}

// -fplugin= alone then also runs the pass: CodeGen loads the pass plugins
// only after parsing.  Loading it twice would run the pass twice.
void add_pass_plugin(CompilerInstance &ci)
{
	std::string self = own_path();
	auto &plugins = ci.getCodeGenOpts().PassPlugins;
	for (const std::string &p : plugins)
		if (same_file(p, self))
			return;
	if (!self.empty())
		plugins.push_back(self);
}

// -fplugin-arg-ftpad-clang-pg=0|1, clang's alone (GCC has a specs file for
// it, docs/kbuild.md): with 1 the plugin takes the place of -pg -mfentry,
// so that it can be loaded into every compile of a Kbuild tree (KCFLAGS)
// and still pad only the objects Kbuild compiles with -pg, and in them the
// functions -pg marks (the pass).  Takes it out of ARGS; 0 or 1, or -1
// after an error.
int take_pg_argument(std::vector<std::string> &args, DiagnosticsEngine &d)
{
	int pg = 0;
	for (auto a = args.begin(); a != args.end();) {
		if (a->rfind("clang-pg=", 0) != 0 && *a != "clang-pg") {
			++a;
			continue;
		}
		std::string value = a->size() > 9 ? a->substr(9) : "";
		if (value != "0" && value != "1") {
			error(d, SourceLocation(), "bad argument -fplugin-arg-ftpad-" + *a +
							   ": must be 0 or 1");
			return -1;
		}
		pg = value == "1";
		a = args.erase(a);
	}
	return pg;
}

struct FtpadAction : PluginASTAction {
	bool ParseArgs(const CompilerInstance &ci, const std::vector<std::string> &given) override
	{
		FtpadConfig &c = ftpad_config();
		DiagnosticsEngine &d = ci.getDiagnostics();
		std::vector<std::string> args = given;
		int pg = take_pg_argument(args, d);
		if (pg < 0)
			return false;
		// Without -pg (an object Kbuild keeps untraced, or one for another
		// target, such as the 32-bit vDSO) the plugin stays out: no pass,
		// no report line, no error.
		if (pg && !ci.getCodeGenOpts().InstrumentForProfiling)
			return false;
		if (pg && !ci.getCodeGenOpts().CallFEntry) {
			error(d, SourceLocation(), "-fplugin-arg-ftpad-clang-pg=1 takes the place of "
						   "-pg -mfentry, and this compile has -pg alone");
			return false;
		}
		// The target is not created yet, but its triple is known.
		llvm::Triple triple(ci.getTargetOpts().Triple);
		const FtpadArch *arch = ftpad_arch_for(triple);
		if (!arch) {
			error(d, SourceLocation(), no_layout(triple));
			return false;
		}
		c.from_frontend = true;
		c.codegen_here = generates_code(ci);
		c.prefix_map = ci.getCodeGenOpts().DebugPrefixMap;
		if (!parse_args(args, c, *arch, d))
			return false;
		c.pg = pg;
		// Before the code generator's pipeline exists: clang 13 builds it
		// before it runs the optimizer, and with it the pass.
		if (!c.opts.unsafe_ipa_ra)
			ftpad_ipra_off();
		add_pass_plugin(const_cast<CompilerInstance &>(ci));
		return true;
	}

	std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance &ci, StringRef) override
	{
		return std::make_unique<Consumer>(ci.getDiagnostics());
	}

	ActionType getActionType() override { return AddBeforeMainAction; }
};

} // namespace

static ParsedAttrInfoRegistry::Add<FtpadAttrInfo> attr("ftpad", "ftpad(before, after)");
// clang's plugin names cannot contain a dash (see Arg).
static FrontendPluginRegistry::Add<FtpadAction> action("ftpad", "ftpad function pads");
