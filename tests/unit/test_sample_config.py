"""etc/berth/berth.conf.sample is what `tox -e genconfig` writes today."""

import pathlib

from oslo_config import cfg, generator

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_sample_config_is_current(tmp_path):
    out = tmp_path / "berth.conf.sample"
    conf = cfg.ConfigOpts()
    generator.register_cli_opts(conf)
    conf(["--config-file", str(ROOT / "etc/berth/berth-config-generator.conf"),
          "--output-file", str(out)])
    generator.generate(conf)
    assert out.read_text() == (ROOT / "etc/berth/berth.conf.sample").read_text(), (
        "run 'tox -e genconfig' and commit etc/berth/berth.conf.sample"
    )


def test_sample_config_documents_every_group():
    text = (ROOT / "etc/berth/berth.conf.sample").read_text()
    for group in ("[DEFAULT]", "[database]", "[scheduler]", "[filter_scheduler]",
                  "[compute_agent]", "[oslo_messaging_rabbit]"):
        assert group in text
    assert "#initial_ram_allocation_ratio = 1.0" in text
    assert "#reserved_host_memory_mb = 512" in text
