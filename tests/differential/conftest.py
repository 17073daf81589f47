"""The differential tests' summary: how many cases each plugin was compared on, and how many agreed."""

import sys


def pytest_terminal_summary(terminalreporter):
    nova = sys.modules.get("tests.differential.test_nova_parity")
    tally = getattr(nova, "TALLY", None)
    if not tally:
        return
    terminalreporter.section("Berth against Nova 34's classes: cases agreed / compared")
    for name, (cases, agreed) in sorted(tally.items()):
        terminalreporter.write_line(f"  {name:40} {agreed:6} / {cases:6}")
    cases = sum(c for c, _ in tally.values())
    agreed = sum(a for _, a in tally.values())
    terminalreporter.write_line(f"  {'all':40} {agreed:6} / {cases:6}")
