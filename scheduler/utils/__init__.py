"""Small helpers every part of Berth uses: JSON, host names, numbers on the
wire, passwords out of logs, a log line once."""
