# SPDX-License-Identifier: MIT
"""An installed prefix used the way a user's build uses it:
a CMake project with find_package(ftpad), a Makefile with pkg-config and
ftpad-config, ftpad-config's answers and errors, and the man pages.  The
consumer examples are the ones in docs/install.md."""
import os
import re
import shutil

import pytest

from ftpadtest import BUILD, ROOT, run

INSTALL_DOC = ROOT / "docs" / "install.md"
TRACED = "traced greet(7)\nhello 7\n"
MAN_PAGES = ["man1/ftpad.1", "man1/ftpad-config.1", "man1/recordmcount-ng.1",
             "man3/libftpad.3", "man7/ftpad-plugin.7"]


def doc_block(lang):
    text = INSTALL_DOC.read_text()
    blocks = re.findall(rf"```{lang}\n(.*?)```", text, re.S)
    assert len(blocks) == 1, f"docs/install.md must have one ```{lang} block"
    return blocks[0]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """`make install` with DESTDIR staging, as a package build does, then used
    from the staged place: everything must find its prefix itself.  The
    build tree is up to date, so `make install` only runs cmake --install."""
    stage = tmp_path_factory.mktemp("stage")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "DESTDIR")}
    p = run(["make", "-C", ROOT, "install", f"BUILD={BUILD}", "PREFIX=/opt/ftpad",
             f"DESTDIR={stage}"], env=env)
    assert f"Installing: {stage}/opt/ftpad/bin/ftpad-config" in p.stdout, p.stdout
    return stage / "opt" / "ftpad"


def consumer(tmp_path, *files):
    src = tmp_path / "hello"
    src.mkdir()
    (src / "hello.c").write_text(doc_block("c"))
    for name, lang in files:
        (src / name).write_text(doc_block(lang))
    return src


def consumer_env(prefix, cc="gcc"):
    return {**os.environ, "CC": cc, "PATH": f"{prefix / 'bin'}:{os.environ['PATH']}",
            "PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig"),
            "LD_LIBRARY_PATH": str(prefix / "lib")}


def check_traced(prefix, exe, tmp_path, env):
    """The program traces itself, and `ftpad record` traces it from outside."""
    assert run([exe], env=env).stdout == TRACED
    trace = tmp_path / "trace.txt"
    p = run([prefix / "bin" / "ftpad", "record", "--text", "--filter", "greet", "-o", trace, "--", exe],
            env=env)
    assert p.stdout == TRACED
    assert re.search(r"^hello-\d+ greet <-main$", trace.read_text(), re.M), trace.read_text()


def test_install_layout(prefix):
    for f in ["bin/ftpad", "bin/recordmcount-ng", "bin/ftpad-config", "lib/ftpad/ftpad.so",
              "lib/ftpad/ftpad-specs.sh", "lib/libftpad.so.1", "lib/libftpad.a",
              "include/ftpad.h", "include/ftpad_site.h", "include/ftpad_trace.h",
              "include/ftpad_patch.h",
              "lib/pkgconfig/ftpad.pc",
              "lib/cmake/ftpad/ftpadConfig.cmake", "lib/cmake/ftpad/ftpadConfigVersion.cmake",
              "lib/cmake/ftpad/ftpadTargets.cmake"] + [f"share/man/{m}" for m in MAN_PAGES]:
        assert (prefix / f).exists(), f
    for built, installed in [(BUILD / "gcc-plugin/aarch64/ftpad.so", "lib/ftpad/aarch64/ftpad.so"),
                             (BUILD / "clang-pass/ftpad-clang.so", "lib/ftpad/ftpad-clang.so")]:
        assert built.exists() == (prefix / installed).exists(), installed


# The plugin each compiler's build must load, under <prefix>/lib/ftpad/, and
# the key its arguments are spelled with: the defaults, and one other GCC
# and clang version (every compiler Debian 12 ships has its own plugin).
CONSUMERS = {
    "gcc": ("ftpad.so", "-fplugin-arg-ftpad-after=8"),
    "clang-14": ("ftpad-clang.so", "-fplugin-arg-ftpad-clang-after=8"),
    "gcc-11": ("gcc-11/ftpad.so", "-fplugin-arg-ftpad-after=8"),
    "clang-15": ("clang-15/ftpad-clang.so", "-fplugin-arg-ftpad-clang-after=8"),
    # clang 13's driver has no -fplugin-arg-: the frontend's own spelling
    "clang-13": ("clang-13/ftpad-clang.so", "-Xclang -plugin-arg-ftpad -Xclang clang-after=8"),
}


@pytest.mark.parametrize("cc", CONSUMERS)
def test_cmake_consumer_builds_runs_and_traces(prefix, tmp_path, cc):
    plugin, key = CONSUMERS[cc]
    if not (prefix / "lib/ftpad" / plugin).exists():
        pytest.skip(f"the plugin for {cc} was not built")
    src = consumer(tmp_path, ("CMakeLists.txt", "cmake"))
    build = tmp_path / "build"
    env = consumer_env(prefix, cc)
    run(["cmake", "-S", src, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}",
         f"-DCMAKE_C_COMPILER={cc}"], env=env)
    p = run(["cmake", "--build", build, "--verbose"], env=env)
    assert f"-fplugin={prefix}/lib/ftpad/{plugin} " in p.stdout, p.stdout
    assert key in p.stdout, p.stdout
    check_traced(prefix, build / "hello", tmp_path, env)


def test_cmake_consumer_without_a_plugin_for_its_compiler_fails(prefix, tmp_path):
    src = consumer(tmp_path, ("CMakeLists.txt", "cmake"))
    fake = fake_gcc(tmp_path, 10)
    p = run(["cmake", "-S", src, "-B", tmp_path / "build", f"-DCMAKE_PREFIX_PATH={prefix}",
             f"-DCMAKE_C_COMPILER={fake}"], check=False)
    assert p.returncode != 0
    err = " ".join(p.stderr.split())  # CMake wraps its messages
    assert f"ftpad: no plugin for the C compiler {fake} (GNU 10." in err, err
    assert "Installed: GCC 12 for x86_64" in err, err


def test_makefile_consumer_builds_runs_and_traces(prefix, tmp_path):
    src = consumer(tmp_path, ("Makefile", "make"))
    env = consumer_env(prefix)
    p = run(["make", "-C", src], env=env)
    assert f"-fplugin={prefix}/lib/ftpad/ftpad.so" in p.stdout, p.stdout
    check_traced(prefix, src / "hello", tmp_path, env)


def test_pkg_config(prefix):
    env = consumer_env(prefix)
    lib = prefix / "lib"
    p = run(["pkg-config", "--cflags", "--libs", "ftpad"], env=env)
    flags = p.stdout.split()
    assert [f for f in flags if f.startswith("-I")] == [f"-I{prefix}/lib/pkgconfig/../../include"]
    assert os.path.samefile(flags[0][2:], prefix / "include")
    assert os.path.samefile(flags[1][2:], lib) and flags[3] == "-lftpad", flags
    assert flags[2].startswith("-Wl,-rpath,") and os.path.samefile(flags[2][11:], lib), flags
    p = run(["pkg-config", "--modversion", "ftpad"], env=env)
    assert p.stdout.strip() == run([prefix / "bin/ftpad-config", "--version"]).stdout.strip()
    p = run(["pkg-config", "--variable=gcc_plugin", "ftpad"], env=env)
    assert os.path.samefile(p.stdout.strip(), lib / "ftpad/ftpad.so")


def test_pkg_config_libs_start_without_ld_library_path(prefix, tmp_path):
    """A prefix outside the loader's path: `pkg-config --libs` has the
    rpath that lets the program find libftpad.so."""
    env = consumer_env(prefix)
    flags = run(["pkg-config", "--cflags", "--libs", "ftpad"], env=env).stdout.split()
    src = tmp_path / "uses.c"
    src.write_text("#include <ftpad.h>\nint main(void) { return ftpad_register_ops == 0; }\n")
    run(["gcc", src, "-o", tmp_path / "uses", *flags], env=env)
    env.pop("LD_LIBRARY_PATH")
    assert run([tmp_path / "uses"], env=env, check=False).returncode == 0


def ftpad_config(prefix, *args, cc=None, check=True):
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    if cc:
        env["CC"] = str(cc)
    return run([prefix / "bin" / "ftpad-config", *args], env=env, check=check)


def fake_gcc(tmp_path, major):
    """gcc that says it is GCC MAJOR, as gcc-MAJOR would."""
    fake = tmp_path / f"gcc-{major}"
    fake.write_text("#!/bin/sh\n# SPDX-License-Identifier: MIT\n"
                    f'case " $* " in *" -dumpversion "*) echo {major}; exit ;; esac\n'
                    f'exec gcc "$@" -U__GNUC__ -D__GNUC__={major}\n')
    fake.chmod(0o755)
    return fake


def test_ftpad_config_names_the_plugin_for_each_compiler(prefix):
    lib = prefix / "lib"
    assert ftpad_config(prefix, "--cflags").stdout == f"-fplugin={lib}/ftpad/ftpad.so -I{prefix}/include\n"
    assert ftpad_config(prefix, "--libs").stdout == f"-L{lib} -lftpad\n"
    assert ftpad_config(prefix, "--gcc-plugin", cc="clang-14").stdout == f"{lib}/ftpad/ftpad.so\n"
    assert ftpad_config(prefix, "--prefix").stdout == f"{prefix}\n"
    if (lib / "ftpad/aarch64/ftpad.so").exists():
        out = ftpad_config(prefix, "--cflags", "--gcc-plugin", cc="aarch64-linux-gnu-gcc-12").stdout
        assert out == f"-fplugin={lib}/ftpad/aarch64/ftpad.so -I{prefix}/include\n{lib}/ftpad/aarch64/ftpad.so\n"
    if (lib / "ftpad/ftpad-clang.so").exists():
        assert ftpad_config(prefix, "--cflags", cc="clang-14").stdout == \
            f"-fplugin={lib}/ftpad/ftpad-clang.so -I{prefix}/include\n"
        assert ftpad_config(prefix, "--clang-plugin").stdout == f"{lib}/ftpad/ftpad-clang.so\n"
    # Every other GCC and clang Debian 12 ships: each its own plugin.
    for cc, plugin in [("gcc-11", "gcc-11/ftpad.so"), ("clang-15", "clang-15/ftpad-clang.so"),
                       ("aarch64-linux-gnu-gcc-11", "aarch64-gcc-11/ftpad.so")]:
        if (lib / "ftpad" / plugin).exists():
            assert ftpad_config(prefix, "--cflags", cc=cc).stdout == \
                f"-fplugin={lib}/ftpad/{plugin} -I{prefix}/include\n"
    if (lib / "ftpad/clang-15/ftpad-clang.so").exists():
        assert ftpad_config(prefix, "--clang-plugin", cc="clang-15").stdout == \
            f"{lib}/ftpad/clang-15/ftpad-clang.so\n"
        assert ftpad_config(prefix, "--gcc-plugin", cc="gcc-11").stdout == \
            f"{lib}/ftpad/gcc-11/ftpad.so\n"
    version = re.search(r"project\(ftpad VERSION (\S+)", (ROOT / "CMakeLists.txt").read_text())[1]
    assert ftpad_config(prefix, "--version").stdout == f"{version}\n"


def test_ftpad_config_errors(prefix, tmp_path):
    p = ftpad_config(prefix, "--cflags", cc=fake_gcc(tmp_path, 10), check=False)
    assert p.returncode == 1 and p.stdout == ""
    assert "ftpad-config: error: no ftpad plugin for" in p.stderr and "(gcc 10, x86_64)" in p.stderr
    assert f"GCC 12 for x86_64: {prefix}/lib/ftpad/ftpad.so" in p.stderr, p.stderr
    p = ftpad_config(prefix, "--libs", "--frobnicate", check=False)
    assert p.returncode == 2 and p.stdout == ""
    assert "unknown option '--frobnicate'" in p.stderr
    p = ftpad_config(prefix, check=False)
    assert p.returncode == 2 and "usage:" in p.stderr
    p = ftpad_config(prefix, "--help")
    for option in re.findall(r"^  (--[a-z-]+)", p.stdout, re.M):
        assert option in ("--cflags", "--libs", "--gcc-plugin", "--clang-plugin", "--kbuild",
                          "--prefix", "--version", "--help"), option
        ftpad_man = (ROOT / "man" / "ftpad-config.1").read_text().replace("\\-", "-")
        assert option in ftpad_man, f"{option} is not in ftpad-config(1)"


def test_ftpad_config_kbuild_writes_the_specs_file(prefix, tmp_path):
    out = ftpad_config(prefix, f"--kbuild={tmp_path}/kb", cc="gcc").stdout
    specs = tmp_path / "kb" / "ftpad-kernel.specs"
    assert out == ("CC_FLAGS_FTRACE=-pg 'CC_FLAGS_USING=-DCC_USING_FENTRY -DCC_USING_NOP_MCOUNT'"
                   f" 'KCFLAGS=-specs={specs}'\n")
    # What docs/kbuild.md says to check: cc1 gets the installed plugin for -pg.
    p = run(["gcc", f"-specs={specs}", "-pg", "-###", "-c", "x.c"], cwd=tmp_path)
    assert f"-fplugin={prefix}/lib/ftpad/ftpad.so" in p.stderr
    assert '"-fplugin-arg-ftpad-abi=kernel"' in p.stderr and ' "-p" ' not in p.stderr


def test_the_build_tree_is_a_prefix(tmp_path):
    """bin/ftpad-config and lib/pkgconfig/ftpad.pc of the build tree, not
    installed, name files that exist, and --kbuild works there."""
    flags = ftpad_config(BUILD, "--cflags", cc="gcc").stdout.split()
    plugin = flags[0].removeprefix("-fplugin=")
    assert os.path.isfile(plugin) and os.path.isfile(flags[1][2:] + "/ftpad.h"), flags
    out = ftpad_config(BUILD, f"--kbuild={tmp_path}/kb", cc="gcc").stdout
    assert (tmp_path / "kb" / "ftpad-kernel.specs").is_file() and "KCFLAGS=-specs=" in out
    env = {**os.environ, "PKG_CONFIG_PATH": str(BUILD / "lib" / "pkgconfig")}
    p = run(["pkg-config", "--variable=gcc_plugin", "ftpad"], env=env)
    assert os.path.isfile(p.stdout.strip()), p.stdout
    src = tmp_path / "uses.c"
    src.write_text("#include <ftpad.h>\nint main(void) { return ftpad_register_ops == 0; }\n")
    flags = run(["pkg-config", "--cflags", "--libs", "ftpad"], env=env).stdout.split()
    run(["gcc", src, "-o", tmp_path / "uses", *flags])
    assert run([tmp_path / "uses"], check=False).returncode == 0


@pytest.mark.parametrize("page", MAN_PAGES)
def test_man_page_renders_without_warnings(prefix, page):
    if shutil.which("man") is None:
        pytest.fail("man is not installed: scripts/install-deps.sh installs man-db")
    path = prefix / "share" / "man" / page
    p = run(["groff", "-man", "-ww", "-z", "-Tutf8", path])
    assert p.stderr == "", p.stderr
    p = run(["man", "-l", "--warnings=w", path], env={**os.environ, "MANWIDTH": "80",
                                                      "MAN_KEEP_STDERR": "1"})
    assert p.stderr == "", p.stderr
    assert len(p.stdout.splitlines()) > 20


def test_libftpad_man_page_has_every_exported_call():
    """libftpad(3) lists every call libftpad.map exports, and no other."""
    exported = set(re.findall(r"^\t\t(ftpad_\w+);", (ROOT / "runtime/libftpad.map").read_text(), re.M))
    page = (ROOT / "man" / "libftpad.3").read_text()
    synopsis = page[page.index(".SH SYNOPSIS"):page.index(".SH DESCRIPTION")]
    # ftpad_unregister_ops_timeout() is on its way from another branch.
    assert set(re.findall(r"\b(ftpad_\w+)\(", synopsis)) - exported <= {"ftpad_unregister_ops_timeout"}
    assert exported <= set(re.findall(r"\b(ftpad_\w+)\(", synopsis))
    for call in re.findall(r"^\.BR (ftpad_\w+) \(\)", page, re.M):
        assert call in exported or call == "ftpad_unregister_ops_timeout", call


def test_ftpad_man_page_has_every_option():
    usage = "".join(run([BUILD / "bin" / "ftpad", *command, "--help"]).stdout
                    for command in [[], ["record"], ["attach"]])
    page = (ROOT / "man" / "ftpad.1").read_text().replace("\\-", "-")
    options = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", usage))
    assert {"-f", "--filter", "-o", "--output", "--help", "--version"} <= options
    for option in options:
        assert re.search(rf"(?<![\w-]){option}\b", page), f"{option} is not in ftpad(1)"


def test_plugin_man_page_has_every_argument():
    """ftpad-plugin(7) documents every key of gcc-plugin.md's arguments table."""
    doc = (ROOT / "docs" / "gcc-plugin.md").read_text()
    table = doc[doc.index("| argument | default | meaning |"):doc.index("Example, three bytes")]
    keys = re.findall(r"^\| `([a-z-]+)=", table, re.M)
    assert len(keys) >= 12, keys
    page = (ROOT / "man" / "ftpad-plugin.7").read_text().replace("\\-", "-")
    for key in keys:
        assert re.search(rf"^\.B[IR]? {re.escape(key)}=", page, re.M), f"{key}= is not in ftpad-plugin(7)"


def test_cmake_instrument_arguments(prefix, tmp_path):
    """POLICY (relative to the source folder), BEFORE and ABI kernel reach the
    compiler, a changed policy file compiles again, and a bad ABI is refused."""
    src = consumer(tmp_path)
    (src / "hello.policy").write_text("# SPDX-License-Identifier: MIT\npad greet after=9\n")
    (src / "k.c").write_text("int kfunc(int x) { return x * 3; }\n")
    (src / "CMakeLists.txt").write_text(
        "# SPDX-License-Identifier: MIT\ncmake_minimum_required(VERSION 3.20)\n"
        "project(hello C)\nfind_package(ftpad REQUIRED)\n"
        "add_executable(hello hello.c)\nftpad_instrument(hello EXIT BEFORE 2 POLICY hello.policy)\n"
        "add_library(k OBJECT k.c)\ntarget_compile_options(k PRIVATE -fno-pie)\n"
        "ftpad_instrument(k ABI kernel BEFORE 16)\n")
    build = tmp_path / "build"
    env = consumer_env(prefix)
    run(["cmake", "-S", src, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}"], env=env)
    out = run(["cmake", "--build", build, "--verbose"], env=env).stdout
    assert f"-fplugin-arg-ftpad-policy={src}/hello.policy" in out, out
    assert "-fplugin-arg-ftpad-abi=user -fplugin-arg-ftpad-exit=1 -fplugin-arg-ftpad-before=2" \
        in out, out
    assert "-fplugin-arg-ftpad-abi=kernel -fplugin-arg-ftpad-before=16" in out, out
    p = run(["readelf", "-SW", build / "CMakeFiles/k.dir/k.c.o"])
    assert "__mcount_loc" in p.stdout and "__ftpad_sites" not in p.stdout
    check_traced(prefix, build / "hello", tmp_path, env)
    (src / "hello.policy").write_text("# SPDX-License-Identifier: MIT\npad greet after=8\n")
    out = run(["cmake", "--build", build, "--verbose"], env=env).stdout
    assert "Building C object CMakeFiles/hello.dir/hello.c.o" in out, out
    assert "Building C object CMakeFiles/k.dir/k.c.o" not in out, out

    (src / "CMakeLists.txt").write_text(
        "# SPDX-License-Identifier: MIT\ncmake_minimum_required(VERSION 3.20)\n"
        "project(hello C)\nfind_package(ftpad REQUIRED)\n"
        "add_executable(hello hello.c)\nftpad_instrument(hello ABI hypervisor)\n")
    p = run(["cmake", "-S", src, "-B", tmp_path / "bad", f"-DCMAKE_PREFIX_PATH={prefix}"],
            env=env, check=False)
    assert p.returncode != 0
    assert "ABI must be user or kernel, not 'hypervisor'" in " ".join(p.stderr.split()), p.stderr
