"""berth simulate --maintenance: drains worked out by hand (what moves, where, when, how long),
refusals with the filter responsible, and bad maintenance files refused with one line."""

import io
import json

import pytest

from scheduler.cmd import cli
from scheduler.cmd.simulate_command import policy_conf
from scheduler.simulation import engine
from scheduler.simulation.inputs import Arrival, Drain, InputError, SimHost, parse_group, parse_maintenance

SPREAD = "[filter_scheduler]\nweighers = RAMWeigher\nram_allocation_ratio = 1.0\n"


@pytest.fixture
def spread(tmp_path):
    path = tmp_path / "spread.conf"
    path.write_text(SPREAD)
    return policy_conf(str(path))


def stays(at, memory_mb, lifetime=None):
    return Arrival(at, memory_mb, 1, 10, lifetime)


def test_a_drain_moves_every_instance_off_max_parallel_at_a_time(spread):
    # Spreading by free RAM, all four go to the big host "a".
    hosts = [SimHost("a", 32768, 16, 1000), SimHost("b", 8192, 8, 100), SimHost("c", 8192, 8, 100)]
    arrivals = [stays(0, 1024), stays(1, 3072), stays(2, 2048), stays(3, 1024)]
    result = engine.run(
        "spread", spread, hosts, arrivals, 60.0, drains=[Drain(100, "a", 2)], migration_time_per_gb=8.0
    )
    # 8 s a GiB: 8, 24, 16 and 8 s. Two at once: the first two start at 100 s; the first ends
    # at 108 and the third starts, ending at 124 with the second; the last runs 124 to 132.
    [drain] = result.drains
    assert (drain.host, drain.instances, drain.moved, drain.not_moved, drain.left) == ("a", 4, 4, {}, 0)
    assert (drain.migrations, drain.peak_in_flight, drain.took) == (4, 2, 32.0)
    used = [share * host.memory_mb for share, host in zip(result.final_ram_use, hosts, strict=True)]
    assert used[0] == 0 and used[1] + used[2] == 7168
    assert result.summary()["drains"] == [
        {
            "host": "a",
            "at": 100,
            "max_parallel": 2,
            "instances": 4,
            "moved": 4,
            "not_moved": 0,
            "not_moved_by": {},
            "left": 0,
            "migrations": 4,
            "took_s": 32.0,
            "peak_in_flight": 2,
        }
    ]


def test_one_migration_at_a_time_takes_the_sum_of_their_times(spread):
    hosts = [SimHost("a", 32768, 16, 1000), SimHost("b", 8192, 8, 100)]
    arrivals = [stays(0, 1024), stays(1, 3072), stays(2, 2048)]
    result = engine.run("spread", spread, hosts, arrivals, 60.0, drains=[Drain(100, "a", 1)])
    [drain] = result.drains
    assert (drain.moved, drain.peak_in_flight, drain.took) == (3, 1, 8.0 + 24.0 + 16.0)


def test_no_host_goes_above_its_capacity_and_what_fits_nowhere_stays_with_the_reason(spread):
    # "a" takes the five 2048 MB instances; "b" and "c" have room for two each.
    hosts = [SimHost("a", 16384, 16, 1000), SimHost("b", 4096, 8, 100), SimHost("c", 4096, 8, 100)]
    arrivals = [stays(t, 2048) for t in range(5)]
    result = engine.run("spread", spread, hosts, arrivals, 60.0, drains=[Drain(100, "a", 2)])
    [drain] = result.drains
    # 16 s each: two from 100 to 116, two from 116 to 132; then the fifth finds no room.
    assert (drain.moved, drain.not_moved, drain.migrations, drain.took) == (4, {"RamFilter": 1}, 4, 32.0)
    assert result.summary()["drains"][0]["not_moved_by"] == {"RamFilter": 1}
    assert result.peak_host_ram == 1.0  # "b" and "c" full, never more
    assert result.final_ram_use == [2048 / 16384, 1.0, 1.0]
    # Both hosts hold an instance while it moves: at the report of 120 s, "a" holds the two
    # moving and the one waiting, "b" and "c" the two landed and the two on their way: seven
    # instances of 2048 MB for five.
    assert result.times == [0.0, 60.0, 120.0]
    assert result.peak_ram == 7 * 2048 / 24576


def test_a_drained_host_takes_nothing_new(spread):
    hosts = [SimHost("a", 32768, 16, 1000), SimHost("b", 8192, 8, 100)]
    result = engine.run("spread", spread, hosts, [stays(50, 1024)], 60.0, drains=[Drain(10, "a")])
    # "a", with the most free RAM, would take it; drained, it does not.
    assert result.final_ram_use == [0.0, 1024 / 8192]
    assert (result.drains[0].instances, result.drains[0].took) == (0, 0.0)


def test_every_other_host_drained_leaves_no_host(spread):
    hosts = [SimHost("a", 8192, 8, 100), SimHost("b", 8192, 8, 100)]
    drains = [Drain(10, "b"), Drain(20, "a")]
    result = engine.run("spread", spread, hosts, [stays(0, 1024)], 60.0, drains=drains)
    assert [d.not_moved for d in result.drains] == [{}, {engine.NO_HOST: 1}]


def test_an_instance_deleted_while_it_moves_frees_its_place_on_both_hosts(spread):
    hosts = [SimHost("a", 32768, 16, 1000), SimHost("b", 8192, 8, 100)]
    # The 4096 MB instance moves from 100 s for 32 s but is deleted at 110 s; the next starts then.
    arrivals = [stays(0, 4096, lifetime=110), stays(1, 1024)]
    result = engine.run("spread", spread, hosts, arrivals, 60.0, drains=[Drain(100, "a", 1)])
    [drain] = result.drains
    assert (drain.moved, drain.left, drain.migrations, drain.took) == (1, 1, 2, 110 + 8 - 100)
    assert result.final_ram_use == [0.0, 1024 / 8192]


def test_an_instance_landing_on_a_host_drained_since_moves_on(spread):
    hosts = [SimHost("a", 32768, 16, 1000), SimHost("b", 16384, 8, 100), SimHost("c", 8192, 8, 100)]
    # On "a"; moving to "b" (most free RAM) from 100 to 108 s; "b" is drained at 104 s.
    result = engine.run(
        "spread", spread, hosts, [stays(0, 1024)], 60.0, drains=[Drain(100, "a"), Drain(104, "b")]
    )
    a, b = result.drains
    assert (a.moved, a.took, b.instances, b.moved, b.took) == (1, 8.0, 1, 1, 12.0)
    assert result.final_ram_use == [0.0, 0.0, 1024 / 8192]


def test_scaling_group_members_moved_by_a_drain_stay_members(spread):
    group = parse_group(
        json.dumps(
            {
                "name": "web",
                "flavor": "m1.tiny",
                "initial": 3,
                "spec": {
                    "min": 1,
                    "max": 10,
                    "metrics": [{"type": "resource", "name": "cpu", "target_utilization": 50}],
                },
                "load": [[0, 1.5], [120, 1.5]],
            }
        )
    )
    hosts = [SimHost(f"h{i}", 4096, 4, 100) for i in range(3)]
    result = engine.run("spread", spread, hosts, [], 60.0, groups=[group], drains=[Drain(20, "h0")])
    [drain] = result.drains
    [web] = result.groups
    # Three members on target (0.5 vCPU each): none made or removed; h0's one moved off it.
    assert (drain.instances, drain.moved) == (1, 1)
    assert set(web.members) == {3} and (web.scale_ups, web.scale_downs) == (0, 0)
    assert result.final_ram_use[0] == 0.0


def test_the_same_seed_gives_the_same_drains(spread):
    from scheduler.simulation.inputs import generate_fleet, generate_workload

    hosts = generate_fleet(10, [(16384, 8, 200)])
    arrivals = generate_workload(200, 1.0, {"m1.small": 3, "m1.medium": 1}, 600.0, 0.4, seed=3)
    drains = [Drain(60, "sim-00001", 3), Drain(90, "sim-00004")]
    first, second = (
        engine.run("spread", spread, hosts, arrivals, 60.0, seed=3, drains=drains).summary() for _ in range(2)
    )
    assert first == second
    assert all(d["moved"] + d["not_moved"] + d["left"] == d["instances"] > 0 for d in first["drains"])


FLEET = [SimHost("a", 1024, 1, 10), SimHost("b", 1024, 1, 10)]


def test_a_maintenance_file_is_read_by_time_with_max_parallel_2_unless_given():
    text = "at,host,max_parallel\n300,b,\n60,a,4\n"
    assert parse_maintenance(text, FLEET, "drains.csv") == [Drain(60, "a", 4), Drain(300, "b", 2)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("at,host\n60,z\n", "drains.csv: line 2: host: 'z' is not a host of the fleet"),
        ("at,host\n60,a\n90,a\n", "drains.csv: line 3: host: 'a' is drained twice"),
        (
            "at,host,max_parallel\n60,a,0\n",
            "drains.csv: line 2: max_parallel: must be a whole number from 1, got '0'",
        ),
        ("at,host\nsoon,a\n", "drains.csv: line 2: at: not a number: 'soon'"),
        ("at,host\n-5,a\n", "drains.csv: line 2: at: must be a number from 0, got '-5'"),
        ("at\n60\n", "drains.csv: line 1: no column 'host'"),
        (
            "at,host,live\n60,a,yes\n",
            "drains.csv: line 1: unknown column 'live'; the columns are at, host, max_parallel",
        ),
        ("at,host\n", "drains.csv: no line after the header"),
    ],
)
def test_a_bad_maintenance_file_is_one_line_naming_what_is_wrong(text, message):
    with pytest.raises(InputError) as refused:
        parse_maintenance(text, FLEET, "drains.csv")
    assert str(refused.value) == message


@pytest.fixture
def files(tmp_path):
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("name,memory_mb,vcpus,disk_gb\na,16384,8,100\nb,4096,8,100\nc,4096,8,100\n")
    trace = tmp_path / "trace.csv"
    trace.write_text("at,lifetime,memory_mb,vcpus\n" + "".join(f"{t},,2048,1\n" for t in range(5)))
    policy = tmp_path / "spread.conf"
    policy.write_text(SPREAD)
    drains = tmp_path / "drains.csv"
    drains.write_text("at,host,max_parallel\n100,a,2\n")
    return ["--fleet", str(fleet), "--workload", str(trace), "--policy", str(policy)] + [
        "--maintenance",
        str(drains),
    ]


def test_the_command_reports_each_drain_in_its_table_and_json(files):
    out = io.StringIO()
    assert cli.main(["simulate", *files], out=out) == 0
    lines = out.getvalue().splitlines()
    said = [" ".join(line.split()) for line in lines]
    assert said[3] == (
        "policy drained host at instances moved not moved not moved by left migrations took peak in flight"
    )
    assert said[4] == "spread a 100 s 5 4 1 RamFilter 1 0 4 32 s 2"
    out = io.StringIO()
    assert cli.main(["simulate", *files, "--json", "--migration-time-per-gb", "4"], out=out) == 0
    [drain] = json.loads(out.getvalue())["drains"]
    assert (drain["moved"], drain["not_moved_by"], drain["took_s"]) == (4, {"RamFilter": 1}, 16.0)


def test_the_command_refuses_a_bad_maintenance_file_with_one_line_and_status_2(files, tmp_path, capsys):
    drains = tmp_path / "drains.csv"
    drains.write_text("at,host\n100,zz\n")
    assert cli.main(["simulate", *files]) == 2
    err = capsys.readouterr().err
    assert err == f"berth simulate: {drains}: line 2: host: 'zz' is not a host of the fleet\n"
