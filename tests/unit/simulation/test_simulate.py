"""berth simulate: figures checked against small cases worked out by hand, the plots, and
bad inputs refused with one line and exit status 2."""

import io
import json
import math

import pytest

from scheduler.cmd import cli, simulate_command, waiting
from scheduler.cmd.arguments import Interrupted
from scheduler.cmd.simulate_command import policy_conf
from scheduler.simulation import engine, plots
from scheduler.simulation.inputs import Arrival, InputError, SimHost, parse_fleet, parse_workload
from tests.unit.cli_scheduler import parse, write_conf

THREE = [SimHost(f"h{i}", 4096, 4, 100) for i in range(3)]
PACK = "[filter_scheduler]\nweighers = RAMWeigher\nram_weight_multiplier = -1.0\nram_allocation_ratio = 1.0\n"
SPREAD = "[filter_scheduler]\nweighers = RAMWeigher\nram_allocation_ratio = 1.0\n"


@pytest.fixture
def policies(tmp_path):
    paths = {}
    for name, text in (("pack", PACK), ("spread", SPREAD)):
        paths[name] = tmp_path / f"{name}.conf"
        paths[name].write_text(text)
    return paths


def run(policies, name, hosts, arrivals, interval=60.0):
    return engine.run(name, policy_conf(str(policies[name])), hosts, arrivals, interval)


def busy(at, memory_mb=1024, lifetime=None):
    return Arrival(at, memory_mb, 1, 10, lifetime, busy=1.0)


def test_packing_puts_three_busy_instances_on_one_host_spreading_on_three(policies):
    arrivals = [busy(0), busy(1), busy(2)]
    pack, spread = (run(policies, name, THREE, arrivals) for name in ("pack", "spread"))
    # Reports at 0 s (nothing placed: no load, no skew) and at 60 s.
    assert pack.times == spread.times == [0.0, 60.0]
    assert (pack.placed, pack.hosts_used, spread.placed, spread.hosts_used) == (3, 1, 3, 3)
    # Loads 3, 0, 0 against 1, 1, 1 busy vCPUs: max / mean is 3 / 1 and 1 / 1.
    assert (pack.skew_mean, pack.skew_max) == (3.0, 3.0)
    assert (spread.skew_mean, spread.skew_max) == (1.0, 1.0)
    assert pack.peak_ram == spread.peak_ram == 3 * 1024 / (3 * 4096)
    assert pack.peak_vcpus == 3 / 12


def test_a_refusal_names_the_filter_that_removed_the_last_hosts(policies):
    arrivals = [busy(0), busy(1), busy(2), busy(3, memory_mb=4096)]  # 3072 MB left on each host
    spread = run(policies, "spread", THREE, arrivals)
    assert (spread.placed, spread.refused) == (3, {"RamFilter": 1})
    assert spread.refusals == [0, 1]  # refused so far, at each report


def test_room_comes_back_when_instances_leave(policies):
    first = [busy(t, memory_mb=4096, lifetime=30) for t in (0, 1, 2)]
    second = [busy(t, memory_mb=4096) for t in (100, 101, 102)]
    result = run(policies, "spread", THREE, first + second)
    assert (result.placed, result.refused_total) == (6, 0)
    assert result.times == [0.0, 60.0, 120.0]


def test_concurrent_placements_at_one_time_read_the_same_figures(policies):
    hosts = [SimHost("h0", 4096, 4, 100), SimHost("h1", 3800, 4, 100)]
    arrivals = [busy(0, memory_mb=512), busy(0, memory_mb=512)]
    conf = policy_conf(str(policies["spread"]))
    one_by_one = engine.run("spread", conf, hosts, arrivals, 60.0)
    at_once = engine.run("spread", conf, hosts, arrivals, 60.0, concurrent=True)
    # One by one, the second sees h0 with 3584 MB free, less than h1's 3800; at once, both see
    # h0's 4096 MB.
    assert one_by_one.final_ram_use == [512 / 4096, 512 / 3800]
    assert at_once.final_ram_use == [1024 / 4096, 0.0]


def test_free_ram_on_a_host_whose_vcpus_are_full_is_stranded(tmp_path):
    path = tmp_path / "tight.conf"
    path.write_text("[filter_scheduler]\ncpu_allocation_ratio = 1.0\nram_allocation_ratio = 1.0\n")
    host = [SimHost("h", 8192, 2, 100)]
    result = engine.run("tight", policy_conf(str(path)), host, [busy(0), busy(1), busy(2)], 60.0)
    assert (result.placed, result.refused) == (2, {"CoreFilter": 1})
    # At 0 s the host is empty (nothing stranded); at 60 s its 6144 MB free are: a mean of 0.5.
    assert result.stranded == 0.5


def test_the_same_inputs_give_the_same_figures(policies):
    from scheduler.simulation.inputs import generate_fleet, generate_workload

    hosts = generate_fleet(20, [(16384, 8, 200), (32768, 16, 400)], zones=2)
    arrivals = generate_workload(500, 2.0, {"m1.small": 3, "m1.medium": 1}, 120.0, 0.4, seed=7)
    first, second = (run(policies, "spread", hosts, arrivals).summary() for _ in range(2))
    assert first == second and first["placed"] + first["refused"] == 500


def test_the_command_prints_a_table_or_json_and_writes_real_plots(policies, tmp_path):
    fleet = tmp_path / "fleet.csv"
    fleet.write_text(
        "name,memory_mb,vcpus,disk_gb,zone\na,4096,4,100,az1\nb,4096,4,100,az1\nc,4096,4,100,az2\n"
    )
    workload = tmp_path / "trace.csv"
    workload.write_text("at,lifetime,flavor,busy\n0,,m1.small,1\n1,,m1.small,1\n2,,m1.small,1\n")
    args = [
        "simulate",
        "--fleet",
        str(fleet),
        "--workload",
        str(workload),
        "--policy",
        str(policies["pack"]),
        "--policy",
        str(policies["spread"]),
    ]
    out = io.StringIO()
    assert cli.main(args + ["--json"], out=out) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    # m1.small is 2048 MB: two fill a host. Packed: loads 2, 1, 0 (skew 2 / 1); spread: 1, 1, 1.
    assert [(r["policy"], r["placed"], r["hosts_used"], r["skew_mean"]) for r in rows] == [
        ("pack", 3, 2, 2.0),
        ("spread", 3, 3, 1.0),
    ]
    out = io.StringIO()
    assert cli.main(args + ["--plot", str(tmp_path / "plots")], out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == "3 arrivals on 3 hosts, reports every 60 s"
    assert lines[1].split()[:4] == ["policy", "placed", "refused", "refused"]
    assert lines[2].split()[:3] == ["pack", "3", "0"] and lines[3].split()[:3] == ["spread", "3", "0"]
    written = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert written == [
        "heatmap-pack.png",
        "heatmap-spread.png",
        "refusals.png",
        "skew.png",
        "utilization.png",
    ]
    for name in written:
        assert (tmp_path / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_skew_plot_draws_one_line_per_policy_with_each_report(policies, tmp_path):
    arrivals = [busy(0), busy(1), busy(2)]
    results = [run(policies, name, THREE, arrivals) for name in ("pack", "spread")]
    figure = plots.skew(results, tmp_path / "skew.png")
    [axes] = figure.axes
    assert [line.get_label() for line in axes.get_lines()] == ["pack", "spread"]
    assert [list(line.get_xdata()) for line in axes.get_lines()] == [[0.0, 1.0], [0.0, 1.0]]  # minutes
    pack_y = list(axes.get_lines()[0].get_ydata())
    assert math.isnan(pack_y[0]) and pack_y[1] == 3.0


def test_a_series_the_same_as_an_earlier_one_is_drawn_dashed_over_it_and_says_so(policies, tmp_path):
    arrivals = [busy(0)]
    results = [run(policies, name, THREE, arrivals) for name in ("pack", "spread")]
    assert results[0].refusals == results[1].refusals == [0, 0]
    figure = plots.refusals(results, tmp_path / "refusals.png")
    [axes] = figure.axes
    lines = axes.get_lines()
    assert [line.get_label() for line in lines] == ["pack", "spread (the same as pack)"]
    assert [line.get_linestyle() for line in lines] == ["-", "--"]
    assert axes.get_ylim() == (-0.02, 1.0)  # no refusal: an axis from 0 to 1, not -0.04 to 0.04
    assert [float(tick) for tick in axes.get_yticks() if -0.02 <= tick <= 1] == [0.0, 1.0]


def test_the_heat_map_names_its_hosts(policies, tmp_path):
    result = run(policies, "pack", THREE, [busy(0)])
    figure = plots.heatmap(result, tmp_path / "heatmap.png")
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_yticklabels()] == [host.name for host in THREE]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "fleet.csv: empty: the first line names the columns (name, memory_mb, vcpus, disk_gb...)"),
        (
            "name,memory_mb,vcpus,disk_gb,color\n",
            "fleet.csv: line 1: unknown column 'color'; the columns are "
            "name, memory_mb, vcpus, disk_gb, zone, aggregates, hidden_cores",
        ),
        ("name,memory_mb,vcpus\na,1,1\n", "fleet.csv: line 1: no column 'disk_gb'"),
        ("name,memory_mb,vcpus,disk_gb\na,lots,1,1\n", "fleet.csv: line 2: memory_mb: not a number: 'lots'"),
        (
            "name,memory_mb,vcpus,disk_gb\na,1,0,1\n",
            "fleet.csv: line 2: vcpus: must be a whole number from 1, got '0'",
        ),
        ("name,memory_mb,vcpus,disk_gb\na,1,1,1\na,1,1,1\n", "fleet.csv: line 3: host 'a' is named twice"),
    ],
)
def test_a_bad_fleet_file_is_one_line_naming_what_is_wrong(text, message):
    with pytest.raises(InputError) as refused:
        parse_fleet(text, "fleet.csv")
    assert str(refused.value) == message


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "at,flavor\n0,m9.huge\n",
            "trace.csv: line 2: flavor: unknown flavor 'm9.huge'; known: m1.tiny, m1.small, "
            "m1.medium, m1.large, m1.xlarge",
        ),
        (
            "at,memory_mb\n0,512\n",
            "trace.csv: line 2: no size: give a flavor, or memory_mb and vcpus (and disk_gb)",
        ),
        ("at,flavor,busy\n0,m1.tiny,2\n", "trace.csv: line 2: busy: must be a number from 0 to 1, got '2'"),
        (
            "at,flavor,hints\n0,m1.tiny,group\n",
            "trace.csv: line 2: hints: key=value pairs separated by ';', got 'group'",
        ),
    ],
)
def test_a_bad_workload_file_is_one_line_naming_what_is_wrong(text, message):
    with pytest.raises(InputError) as refused:
        parse_workload(text, "trace.csv")
    assert str(refused.value) == message


def test_the_command_refuses_bad_files_with_one_line_and_status_2(tmp_path, capsys):
    policy = tmp_path / "bad.conf"
    policy.write_text("[filter_scheduler]\nenabled_filters = NoSuchFilter\n")
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("name,memory_mb,vcpus\n")
    for args, said in (
        (
            ["--fleet", str(tmp_path / "missing.csv")],
            f"{tmp_path / 'missing.csv'}: No such file or directory",
        ),
        (["--fleet", str(fleet)], f"{fleet}: line 1: no column 'disk_gb'"),
        (["--policy", str(policy), "--count", "10"], f"{policy}: "),
    ):
        assert cli.main(["simulate", *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"berth simulate: {said}"), err


def test_a_generated_fleet_takes_its_sizes_in_turn_and_hidden_load_on_every_kth_host():
    from scheduler.simulation.inputs import generate_fleet

    hosts = generate_fleet(5, [(1024, 2, 10), (2048, 4, 20)], zones=2, hidden_cores=6.0, hidden_every=2)
    assert [(h.memory_mb, h.zone, h.hidden_cores) for h in hosts] == [
        (1024, "az1", 6.0),
        (2048, "az2", 0.0),
        (1024, "az1", 6.0),
        (2048, "az2", 0.0),
        (1024, "az1", 6.0),
    ]


GROUP = {
    "name": "web",
    "flavor": "m1.tiny",
    "initial": 2,
    "spec": {"min": 1, "max": 10, "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}]},
    "load": [[0, 4], [60, 4]],
}


def test_a_scaling_group_grows_to_what_the_algorithm_asks_through_the_policys_placements(policies):
    from scheduler.simulation.inputs import parse_group

    group = parse_group(json.dumps(GROUP), "web.json")
    result = engine.run(
        "spread", policy_conf(str(policies["spread"])), THREE, [], 60.0, groups=[group], sync_period=15.0
    )
    [web] = result.groups
    # 4 busy vCPUs of work. At 0 s the first sync makes the 2 members (no sample yet); at 15 s
    # they are saturated, 100% against 50%: 2 x 2 = 4; at 30 s the 4 still are: 8; from 45 s
    # the 8 use half a vCPU each, on target: 8 stays.
    assert web.times[:5] == [0.0, 15.0, 30.0, 45.0, 60.0]
    assert web.members[:5] == [2, 4, 8, 8, 8] and web.desired[:5] == [2, 4, 8, 8, 8]
    assert (web.scale_ups, web.scale_downs, web.unplaced) == (2, 0, 0)
    assert result.placed == 8 and result.hosts_used == 3  # spread over the three hosts


def test_a_scale_down_removes_a_member_of_the_host_holding_the_most_as_the_controller_does(policies):
    from scheduler.simulation.inputs import parse_group

    # Spreading by free RAM, the first two members go to "big" (10,000 MB, then 7,952 left,
    # more than the 7,500 of "small"), the newest to "small".
    hosts = [SimHost("big", 10_000, 8, 100), SimHost("small", 7_500, 8, 100)]
    spec = dict(GROUP["spec"], max=3, behavior={"scale_down": {"stabilization_window_s": 0}})
    group = parse_group(json.dumps(dict(GROUP, flavor="m1.small", initial=3, spec=spec, load=[[0, 0.9]])))
    result = engine.run(
        "spread", policy_conf(str(policies["spread"])), hosts, [], 60.0, groups=[group], sync_period=15.0
    )
    [web] = result.groups
    # 0.9 busy vCPU on 3 members of 1 vCPU is 30% against 50%: 3 go to 2 at 15 s.
    assert web.members[:3] == [3, 2, 2] and web.scale_downs == 1
    # The member removed is big's newest (scheduler.scaling.members.victims), not the newest.
    ram_used = [use * host.memory_mb for use, host in zip(result.final_ram_use, hosts, strict=True)]
    assert ram_used == pytest.approx([2048, 2048])


@pytest.mark.parametrize(
    "change, message",
    [
        ({"flavor": "m9.huge"}, "web.json: flavor: unknown flavor 'm9.huge'"),
        ({"load": []}, "web.json: load: a list of [seconds, busy vCPUs] pairs, got []"),
        ({"initial": 11}, "web.json: initial: a whole number from min (1) to max (10), got 11"),
        ({"color": "red"}, "web.json: unknown key 'color'; the keys are name, flavor, initial, spec, load"),
        (
            {"spec": {"max": 3, "metrics": [{"type": "instance", "name": "rps", "target_average": 10}]}},
            "web.json: spec: metrics: berth simulate reads the cpu resource metric only",
        ),
    ],
)
def test_a_bad_scaling_group_file_is_one_line(change, message):
    from scheduler.simulation.inputs import parse_group

    with pytest.raises(InputError) as refused:
        parse_group(json.dumps(dict(GROUP, **change)), "web.json")
    assert str(refused.value).startswith(message)


def test_the_groups_plot_draws_members_and_desired_per_policy(policies, tmp_path):
    from scheduler.simulation.inputs import parse_group

    group = parse_group(json.dumps(GROUP), "web.json")
    results = [
        engine.run(name, policy_conf(str(policies[name])), THREE, [], 60.0, groups=[group])
        for name in ("pack", "spread")
    ]
    figure = plots.groups(results, tmp_path / "groups.png")
    [axes] = figure.axes
    assert [line.get_label() for line in axes.get_lines()] == [
        "pack members",
        "pack desired",
        "spread members",
        "spread desired",
    ]
    assert list(axes.get_lines()[0].get_ydata())[:3] == [2, 4, 8]
    assert (tmp_path / "groups.png").read_bytes()[:4] == b"\x89PNG"


def test_a_value_left_out_is_said_to_be_missing():
    with pytest.raises(InputError) as refused:
        parse_fleet("name,memory_mb,vcpus,disk_gb\na,1024,2\n", "fleet.csv")
    assert str(refused.value) == "fleet.csv: line 2: disk_gb: missing"
    from scheduler.simulation.inputs import parse_group

    with pytest.raises(InputError) as refused:
        parse_group(json.dumps({k: v for k, v in GROUP.items() if k != "flavor"}), "web.json")
    assert str(refused.value).startswith("web.json: flavor: a named flavor (m1.tiny, ")


def test_the_engine_tells_how_far_it_is_at_each_round_of_reports(policies):
    reached = []
    engine.run("spread", policy_conf(str(policies["spread"])), THREE, [busy(0), busy(100)], 60.0,
               progress=lambda now, end: reached.append((now, end)))
    assert reached == [(0.0, 160.0), (60.0, 160.0), (120.0, 160.0)]


class Ticks:
    """A clock a second later at each reading."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1
        return self.now


def test_without_a_terminal_simulate_says_each_run_as_it_ends():
    told = io.StringIO()
    runs = simulate_command.RunProgress(2, waiting.Progress(told, tty=False), clock=Ticks())
    for name in ("pack", "spread"):
        runs.start(name)
        runs.reached(30.0, 60.0)
        runs.ended(None)
    assert told.getvalue() == ("berth simulate: run 1/2 (pack) done in 2.0 s\n"
                               "berth simulate: run 2/2 (spread) done in 2.0 s\n")


def test_on_a_terminal_simulate_rewrites_one_line_with_its_share_done():
    screen = io.StringIO()
    runs = simulate_command.RunProgress(2, waiting.Progress(screen, tty=True), clock=Ticks())
    runs.start("pack")
    runs.reached(900.0, 3600.0)
    assert screen.getvalue() == ("\rberth simulate: run 1/2 (pack): starting"
                                 "\rberth simulate: run 1/2 (pack): 25% of 3,600 simulated s (1 s)")
    runs.progress.clear()
    drawn = len("berth simulate: run 1/2 (pack): 25% of 3,600 simulated s (1 s)")
    assert screen.getvalue().endswith("\r" + " " * drawn + "\r")  # erased before the table


def test_ctrl_c_in_simulate_is_one_line_and_exit_status_130(policies, monkeypatch, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "run", interrupted)
    args = parse(write_conf(tmp_path), "simulate", "--hosts", "3", "--count", "3", "--policy",
                 str(policies["pack"]))
    with pytest.raises(Interrupted) as raised:
        args.func(None, args, io.StringIO())
    assert raised.value.exit_code == 130
    assert str(raised.value) == "interrupted: 0 of 1 simulation run(s) done, in 'pack'; nothing reported"
