"""The status page of a real scheduler in a real headless Chromium: it shows the fleet's
hosts, an instance booted, a refusal's reason and a resize waiting for confirmation appear
without reloading, a scaling group is plotted, and the browser reports no error."""

from tests.functional.browser import chromium, wait_until, watched_page
from tests.functional.test_prometheus import AGENTS, boot, fleet  # noqa: F401 - a fixture


def test_the_page_shows_the_fleet_and_follows_it_without_reloading(fleet):  # noqa: F811 - the fixture
    port = fleet.metrics_port("scheduler")
    with chromium() as browser:
        page, problems = watched_page(browser)
        page.goto(f"http://127.0.0.1:{port}/")
        wait_until(page, "window.berthRenders >= 1", what="the page drawn")
        page.evaluate("window.notReloaded = true")
        assert page.inner_text("#scheduler") == "scheduler"
        zones = page.locator(".zone")
        assert [zones.nth(i).get_attribute("data-hosts") for i in range(zones.count())] == ["2"]
        assert page.inner_text("#hosts-up").startswith("2")
        assert sorted(page.locator("#fullest tbody tr td:first-child").all_text_contents()) == AGENTS

        for args in (("create", "fast", "--zone", "az9"), ("add-host", "fast", AGENTS[0])):
            assert fleet.cli("aggregate", *args).returncode == 0
        groups = """[...document.querySelectorAll('#heatmap .zone')]
                    .map(g => g.dataset.group + ' ' + g.dataset.hosts).join(', ')"""
        wait_until(page, f"{groups} === 'az9 1, nova 1'", what="the hosts grouped by zone")
        page.select_option("#grouping", "aggregate")
        assert page.evaluate(groups) == "(in no aggregate) 1, fast 1"

        placed = boot(fleet, "m1.small", 2)
        refused = boot(fleet, "m1.xlarge", 1)
        fleet.wait_states(placed, {"ACTIVE"})
        fleet.wait_states(refused, {"ERROR"})
        wait_until(page, """[...document.querySelectorAll('#instances tbody tr')]
                            .some(row => row.innerText.replace(/\\s+/g, ' ').trim() === 'ACTIVE 2')""",
                   what="2 instances ACTIVE shown")
        refusals = "document.querySelector('#refusals tbody').innerText"
        wait_until(page, f"{refusals}.includes('RamFilter removed 2')", what="the refusal's reason shown")
        assert refused[0] in page.inner_text("#refusals")

        resized = fleet.cli("resize", placed[0], "--flavor", "m1.medium")
        assert resized.returncode == 0, resized.stdout + resized.stderr
        moves = "document.querySelector('#moves tbody').innerText"
        wait_until(page, f"{moves}.includes('waiting for confirmation')", what="the resize shown in progress")
        assert placed[0] in page.inner_text("#moves")

        done = fleet.cli("scaling-group", "create", "web", "--flavor", "m1.tiny", "--min", "1", "--max", "3",
                         "--cpu", "50")
        assert done.returncode == 0, done.stderr
        plotted = """document.querySelector('.group[data-group="web"] svg polyline.members') !== null"""
        wait_until(page, plotted, timeout=30, what="the scaling group plotted")
        assert page.evaluate("window.notReloaded") is True
        assert problems == []
