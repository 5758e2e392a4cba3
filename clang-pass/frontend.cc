// SPDX-License-Identifier: MIT
// frontend.cc - the clang half of ftpad-clang.so: reads the plugin's
// arguments (-fplugin-arg-ftpad-clang-KEY=VALUE), defines the ftpad(before,
// after) attribute, and tells the pass which functions are
// no_instrument_function.  Clang leaves no trace of that attribute in the
// IR, so only the frontend can see it.
#include "ftpad-clang.h"

#include <dlfcn.h>
#include <stdlib.h>

#include "clang/AST/ASTConsumer.h"
#include "clang/AST/Mangle.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendPluginRegistry.h"
#include "clang/Sema/ParsedAttr.h"
#include "clang/Sema/Sema.h"

using namespace clang;

namespace {

const unsigned SITE_BYTES = 5;

// Layouts from ftpad attributes, by the function's first declaration;
// the consumer turns them into names once the whole file is parsed.
std::map<const Decl *, FtpadLayout> &attributed()
{
	static std::map<const Decl *, FtpadLayout> m;
	return m;
}

void error(DiagnosticsEngine &d, SourceLocation loc, const std::string &msg)
{
	d.Report(loc, d.getCustomDiagID(DiagnosticsEngine::Error, "ftpad: %0")) << msg;
}

bool layout_ok(unsigned before, unsigned after, std::string &why)
{
	if (before > 255)
		why = "before must be 0 to 255";
	else if (after != SITE_BYTES)
		why = "after must be 5: LLVM 14 emits longer entries as one long NOP "
		      "(docs/clang-pass.md)";
	return why.empty();
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
		std::string why;
		if (!layout_ok(v[0], v[1], why)) {
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
	explicit Collector(ASTContext &ctx) : gen(ctx) {}
	bool shouldVisitTemplateInstantiations() const { return true; }

	bool VisitFunctionDecl(FunctionDecl *fd)
	{
		if (fd->isDependentContext())
			return true;
		// An instance of a template has the attribute of its pattern.
		const FunctionDecl *pattern = fd->getTemplateInstantiationPattern();
		auto a = attributed().find((pattern ? pattern : fd)->getCanonicalDecl());
		const char *skip = nullptr;
		if (fd->hasAttr<NoInstrumentFunctionAttr>())
			skip = "no_instrument_function";
		else if (fd->hasAttr<PatchableFunctionEntryAttr>())
			skip = "user patchable_function_entry";
		if (a == attributed().end() && !skip)
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
	void HandleTranslationUnit(ASTContext &ctx) override
	{
		Collector(ctx).TraverseDecl(ctx.getTranslationUnitDecl());
	}
};

bool parse_uint(const std::string &s, unsigned max, unsigned &out)
{
	char *end;
	if (s.empty() || s[0] == '-' || s[0] == '+')
		return false;
	unsigned long v = strtoul(s.c_str(), &end, 10);
	if (*end || v > max)
		return false;
	out = v;
	return true;
}

bool parse_globs(const std::string &s, std::vector<std::string> &out)
{
	out.clear();
	if (s.empty())
		return true;
	for (size_t start = 0;;) {
		size_t comma = s.find(',', start);
		std::string g = s.substr(start, comma == std::string::npos ? comma : comma - start);
		if (g.empty())
			return false;
		out.push_back(g);
		if (comma == std::string::npos)
			return true;
		start = comma + 1;
	}
}

// One KEY=VALUE; false when it is not understood.  The driver cuts
// -fplugin-arg-ftpad-clang-before=3 at the first dash after the plugin's
// name, so it arrives as "clang-before=3"; the GCC plugin's spelling,
// -fplugin-arg-ftpad-before=3, arrives as "before=3" and means the same.
bool parse_arg(std::string arg, FtpadConfig &c)
{
	if (arg.rfind("clang-", 0) == 0)
		arg.erase(0, 6);
	size_t eq = arg.find('=');
	if (eq == std::string::npos)
		return false;
	std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
	unsigned n;
	if (key == "before" && parse_uint(value, 255, n))
		c.layout.before = n;
	else if (key == "after" && parse_uint(value, 255, n) && n == SITE_BYTES)
		c.layout.after = n;
	else if (key == "ops" && parse_uint(value, 1, n))
		c.ops = n;
	else if (key == "min-insns" && parse_uint(value, 65535, n))
		c.min_insns = n;
	else if (key == "report" && !value.empty())
		c.report = value;
	else if (key == "unsafe-ipa-ra" && parse_uint(value, 1, n))
		c.unsafe_ipra = n;
	else if (key == "include")
		return parse_globs(value, c.include);
	else if (key == "exclude")
		return parse_globs(value, c.exclude);
	else if (key == "exclude-section")
		return parse_globs(value, c.exclude_section);
	else
		return false;
	return true;
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

struct FtpadAction : PluginASTAction {
	bool ParseArgs(const CompilerInstance &ci, const std::vector<std::string> &args) override
	{
		FtpadConfig &c = ftpad_config();
		for (const std::string &a : args) {
			if (!parse_arg(a, c)) {
				error(ci.getDiagnostics(), SourceLocation(),
				      "bad or unknown argument -fplugin-arg-ftpad-" + a +
					      " (docs/clang-pass.md)");
				return false;
			}
		}
		add_pass_plugin(const_cast<CompilerInstance &>(ci));
		return true;
	}

	std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance &, StringRef) override
	{
		return std::make_unique<Consumer>();
	}

	ActionType getActionType() override { return AddBeforeMainAction; }
};

} // namespace

static ParsedAttrInfoRegistry::Add<FtpadAttrInfo> attr("ftpad", "ftpad(before, after)");
// clang's plugin names cannot contain a dash (see parse_arg).
static FrontendPluginRegistry::Add<FtpadAction> action("ftpad", "ftpad function pads");
