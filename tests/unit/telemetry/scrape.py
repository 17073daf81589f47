"""Reading what a Prometheus server would scrape, through prometheus_client's own parser."""

import urllib.request

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families


def samples(text):
    """{(sample name, sorted label pairs): value} of an exposition's text."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(name, **labels):
    """A sample of this process' registry now (0.0 when it has none yet)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def fetch(port, path="/metrics"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return response.status, response.headers.get("Content-Type"), response.read().decode()
