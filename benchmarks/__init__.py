"""Benchmarks: crawlstore side by side with the alternatives, reported as ratios in one run."""
