#!/usr/bin/env python3
"""Differential campaign: kafkapy's RE2J-compatible topic regexes against Google's RE2J itself.

Kafka 4.0 compiles SubscribedTopicRegex with com.google.re2j and full-matches topic names; kafkapy
parses and matches them itself (kafkapy/groupcoord/consumer/re2_syntax.py, topic_regex.py). This
campaign generates patterns (from a grammar of RE2 syntax, and random strings over its special
characters, so both valid and invalid ones), asks a small Java program running RE2J whether
each compiles (and RE2J's error description when not) and which of a fixed set of names it
matches, and compares with ``compile_topic_regex`` / ``matching_topics``.

Needs java/javac and an re2j jar (found in ~/.m2 or ~/.cache, or --jar). Not run in CI.

    python bench/fuzz/re2j_differential.py                   # 5000 patterns
    python bench/fuzz/re2j_differential.py --patterns 50000 --seed 2
"""
from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from kafkapy.groupcoord.consumer.topic_regex import (  # noqa: E402
    InvalidTopicRegex,
    compile_topic_regex,
    matching_topics,
)

ORACLE = r"""
import com.google.re2j.Pattern;
import com.google.re2j.PatternSyntaxException;
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class Re2jOracle {
    static String unhex(String h) {
        byte[] b = new byte[h.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return new String(b, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int n = Integer.parseInt(in.readLine().trim());
        List<String> names = new ArrayList<>();
        for (int i = 0; i < n; i++) names.add(unhex(in.readLine().trim()));
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out), false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            String p = unhex(line.trim());
            try {
                Pattern c = Pattern.compile(p);
                StringBuilder sb = new StringBuilder("M ");
                for (String name : names) sb.append(c.matcher(name).matches() ? '1' : '0');
                out.println(sb);
            } catch (PatternSyntaxException e) {
                out.println("E " + e.getDescription());
            } catch (Throwable t) {
                out.println("X " + t.getClass().getName());
            }
        }
        out.flush();
    }
}
"""

NAMES = ["", "a", "b", "A", "B", "ab", "ba", "aB", "Ab", "aa", "aaa", "abab", "1", "12", "a1", "_", "-", ".",
         "a.b", "a-b", "a_b", "a\nb", "\n", "a\n", "é", "É", "k", "K", "\u212a", "s", "\u017f", " ", "a b", "x{",
         "{", "}", "]", "[", "a*", "*", "+", "?", "|", "(", ")", "\\", "^", "$", "orders.eu-west.v2-1",
         "orders", "ORDERS", "topic-1", "topic_2", "__consumer_offsets", "aaaaaaaaaaaaaaaaaaaab", "\t", "0",
         "9", "Z", "z", "~"]

ATOMS = ["a", "b", "A", "1", "_", "-", r"\.", ".", r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", r"\pL", r"\PL",
         r"\p{Lu}", r"\p{^Ll}", r"\pN", r"\p{Greek}", r"\p{Latin}", r"\p{Common}", r"\P{Lu}", r"\x41", r"\x{62}",
         r"\101", r"\0", r"\Qa.b\E", r"\Q*\E", r"\n", r"\t", "é", r"\é", r"\_", r"\-", "[a-c]", "[^ab]",
         "[[:alpha:]]", "[[:^digit:]x]", r"[\d.]", "[]a]", "[^]a]", "[a-]", "[-a]", r"[\pL\d]", r"[^\w]",
         "[[:word:]-]", r"[\x41-\x43]", "[a-c-e]", "^", "$", r"\A", r"\z", r"\b", r"\B", "k", "K", "s"]
QUANTS = ["*", "+", "?", "{2}", "{1,2}", "{0,}", "{,2}", "{01}", "*?", "+?", "??", "{2}?", "{1,3}?", "{0}"]
SPECIAL = "ab()[]{}|*+?^$.\\-:,0123456789PpQEdDwWsSbBAzZCxiUms<>=!#'_"


def grammar_pattern(rnd: random.Random, depth: int = 0) -> str:
    kind = rnd.random()
    if depth > 3 or kind < 0.35:
        return rnd.choice(ATOMS)
    if kind < 0.55:
        return "".join(grammar_pattern(rnd, depth + 1) for _ in range(rnd.randint(2, 3)))
    if kind < 0.65:
        return "|".join(grammar_pattern(rnd, depth + 1) for _ in range(rnd.randint(2, 3)))
    if kind < 0.8:
        inner = grammar_pattern(rnd, depth + 1)
        opener = rnd.choice(["(", "(?:", "(?i:", "(?s:", "(?m:", "(?-i:", "(?i-s:", "(?U:"])
        return f"{opener}{inner})"
    if kind < 0.88:
        return rnd.choice(["(?i)", "(?s)", "(?m)", "(?U)", "(?-i)"]) + grammar_pattern(rnd, depth + 1)
    return grammar_pattern(rnd, depth + 1) + rnd.choice(QUANTS)


def random_pattern(rnd: random.Random) -> str:
    return "".join(rnd.choice(SPECIAL) for _ in range(rnd.randint(1, 10)))


def find_jar(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    for root in (Path.home() / ".m2", Path.home() / ".cache"):
        jars = sorted(root.glob("**/re2j*.jar")) if root.exists() else []
        if jars:
            return jars[-1]
    return None


def ours(pattern: str) -> str:
    try:
        compile_topic_regex(pattern)
    except InvalidTopicRegex as exc:
        return f"E {exc.description}"
    found = matching_topics(pattern, NAMES)
    return "M " + "".join("1" if name in found else "0" for name in NAMES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patterns", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jar")
    parser.add_argument("--show", type=int, default=15, help="mismatches to print")
    args = parser.parse_args()
    jar = find_jar(args.jar)
    java, javac = shutil.which("java"), shutil.which("javac")
    if jar is None or not java or not javac:
        sys.exit("needs java, javac and an re2j jar (--jar)")
    rnd = random.Random(args.seed)
    patterns = list(dict.fromkeys(
        grammar_pattern(rnd) if rnd.random() < 0.7 else random_pattern(rnd) for _ in range(args.patterns)))
    with tempfile.TemporaryDirectory(prefix="re2j-diff-") as tmp:
        source = Path(tmp) / "Re2jOracle.java"
        source.write_text(ORACLE)
        subprocess.run([javac, "-nowarn", "-d", tmp, "-cp", str(jar), str(source)], check=True, timeout=120)
        lines = [str(len(NAMES)), *(n.encode().hex() for n in NAMES), *(p.encode().hex() for p in patterns)]
        result = subprocess.run([java, "-Xmx512m", "-cp", f"{tmp}:{jar}", "Re2jOracle"], input="\n".join(lines) + "\n",
                                capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            sys.exit(f"oracle failed: {result.stderr[-2000:]}")
    answers = result.stdout.splitlines()
    assert len(answers) == len(patterns), (len(answers), len(patterns))
    counts = {"same": 0, "both invalid, other description": 0, "validity differs": 0, "matches differ": 0,
              "matches differ on non-ASCII names only (documented)": 0}
    shown = 0
    for pattern, theirs in zip(patterns, answers):
        mine = ours(pattern)
        if mine == theirs:
            counts["same"] += 1
            continue
        if mine[0] == "E" and theirs[0] == "E":
            key = "both invalid, other description"
        elif mine[0] != theirs[0]:
            key = "validity differs"
        elif all(NAMES[i].isascii() for i in range(len(NAMES)) if theirs[2 + i] != mine[2 + i]):
            key = "matches differ"
        else:
            key = "matches differ on non-ASCII names only (documented)"
        counts[key] += 1
        if key.endswith("(documented)"):
            continue
        if shown < args.show:
            shown += 1
            detail = theirs if theirs[0] != "M" or mine[0] != "M" else ", ".join(
                repr(NAMES[i]) + ("" if theirs[2 + i] == "1" else " not") + " matched by RE2J"
                for i in range(len(NAMES)) if theirs[2 + i] != mine[2 + i])
            print(f"{key}: {pattern!r}\n  ours:  {mine[:80]}\n  re2j:  {detail[:200]}")
    valid = sum(1 for a in answers if a.startswith("M "))
    print(f"\n{len(patterns)} patterns ({valid} valid for RE2J, jar {jar.name}), {len(NAMES)} names each:")
    for key, value in counts.items():
        print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
