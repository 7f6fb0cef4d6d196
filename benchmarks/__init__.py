"""``make bench``: throughput and peak memory of fieldcheck's hot paths beside a baseline measured
in the same run, on generated data. The ratio is the figure (machines differ; ratios travel)."""
