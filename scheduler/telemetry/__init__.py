"""What a Berth daemon tells Prometheus: the metrics each part counts, and the HTTP
endpoint that serves them (``[prometheus]``)."""

import prometheus_client

# Each counter's and histogram's creation time as a series of its own doubles what a
# scrape carries and tells an operator nothing the process' start time does not.
prometheus_client.disable_created_metrics()
