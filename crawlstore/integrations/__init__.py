"""Glue between crawlstore and the libraries crawlers use (optional dependencies)."""
