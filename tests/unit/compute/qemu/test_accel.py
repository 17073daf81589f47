"""The accelerator: kvm, tcg, or auto (KVM only when a probe guest runs under it)."""

import pytest

from compute_agent.driver.base import CannotStart
from compute_agent.driver.qemu import accel
from tests.unit.compute.qemu.conftest import write_script

#: A stand-in for qemu that writes what SeaBIOS says to the -serial file:PATH it is given.
SAYS_FIRMWARE = """for arg; do
    case "$arg" in file:*) echo "SeaBIOS (version 1.16)" > "${arg#file:}";; esac
done
sleep 30
"""


@pytest.mark.parametrize("chosen", ["kvm", "tcg"])
def test_a_chosen_accelerator_is_taken_as_it_is(chosen, tmp_path):
    device = tmp_path / "kvm"
    device.write_text("")
    assert accel.choose(chosen, "qemu", 1.0, kvm_device=str(device)) == (chosen, f"[qemu] accel = {chosen}")


def test_kvm_chosen_without_its_device_stops_the_agent_saying_what_to_do(tmp_path):
    with pytest.raises(CannotStart) as raised:
        accel.choose("kvm", "qemu", 1.0, kvm_device=str(tmp_path / "kvm"))
    assert str(raised.value) == (f"[qemu] accel = kvm but no {tmp_path / 'kvm'}: load the kvm module of the "
                                 "CPU (kvm_intel or kvm_amd), add the agent's user to the kvm group, or set "
                                 "accel = auto or tcg")


def test_tcg_chosen_needs_no_kvm_device(tmp_path):
    assert accel.choose("tcg", "qemu", 1.0, kvm_device=str(tmp_path / "kvm")) == ("tcg", "[qemu] accel = tcg")


def test_auto_without_kvm_runs_tcg(tmp_path):
    assert accel.choose("auto", "qemu", 1.0, kvm_device=str(tmp_path / "kvm")) == (
        "tcg", f"auto: no {tmp_path / 'kvm'}")


def test_auto_takes_kvm_when_a_probe_guest_runs(tmp_path):
    device = tmp_path / "kvm"
    device.write_text("")
    chosen, why = accel.choose("auto", write_script(tmp_path / "qemu", SAYS_FIRMWARE), 20.0,
                               kvm_device=str(device))
    assert chosen == "kvm", why
    assert why.startswith("auto: a probe guest ran under KVM")


def test_auto_runs_tcg_when_a_probe_guest_says_nothing(tmp_path):
    device = tmp_path / "kvm"
    device.write_text("")
    binary = write_script(tmp_path / "qemu", "sleep 30\n")
    chosen, why = accel.choose("auto", binary, 0.5, kvm_device=str(device))
    assert (chosen, why) == ("tcg", "auto: a probe guest under KVM said nothing within 0.5 s")


def test_auto_runs_tcg_when_kvm_refuses_the_probe(tmp_path):
    device = tmp_path / "kvm"
    device.write_text("")
    refusal = "Could not access KVM kernel module: Permission denied"
    binary = write_script(tmp_path / "qemu", f'echo "{refusal}" >&2\nexit 1\n')
    assert accel.choose("auto", binary, 20.0, kvm_device=str(device)) == (
        "tcg", f"auto: KVM refused a probe guest: {refusal}")
