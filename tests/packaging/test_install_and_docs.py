# SPDX-License-Identifier: MIT
"""What a user gets from `make install`, and the README's example, both
used for real."""
import re

from ftpadtest import BUILD, INCLUDE, ROOT, run

SUMMARY = re.compile(r"^ftpad: (\d+) sites found, (\d+) sites enabled, (\d+) calls seen$")


def test_installed_tree_traces_a_program(tmp_path, plugin, libftpad):
    prefix = tmp_path / "prefix"
    run(["cmake", "--install", BUILD, "--prefix", prefix])
    src = tmp_path / "hello.c"
    src.write_text('#include <stdio.h>\n'
                   '__attribute__((noinline)) int greet(int n) { return printf("hi %d\\n", n); }\n'
                   'int main(void) { return greet(1) < 0; }\n')
    exe = tmp_path / "hello"
    run(["gcc", "-O2", f"-fplugin={prefix}/lib/ftpad/ftpad.so", src, "-o", exe])
    trace = tmp_path / "trace.txt"
    p = run([prefix / "bin" / "ftpad", "record", "--text", "--filter", "greet", "-o", trace, "--", exe])
    assert p.stdout == "hi 1\n"
    lines = trace.read_text().splitlines()
    assert re.fullmatch(r"hello-\d+ greet <-main", lines[0]), lines
    m = SUMMARY.match(lines[-1])
    assert m and m.groups() == ("2", "1", "1"), lines[-1]


def test_readme_example_builds_and_runs(tmp_path, plugin, libftpad):
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```c\n(.*?)```", readme, re.S).group(1)
    src = tmp_path / "example.c"
    src.write_text(code)
    exe = tmp_path / "example"
    run(["gcc", "-O2", "-Wall", "-Werror", "-Wno-unused-parameter", f"-fplugin={plugin}",
         f"-I{INCLUDE}", src, "-o", exe, f"-L{BUILD / 'runtime'}", "-lftpad",
         f"-Wl,-rpath,{BUILD / 'runtime'}"])
    run([exe])
