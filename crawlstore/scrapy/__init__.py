"""Scrapy on crawlstore (``pip install 'crawlstore[scrapy]'``): a crash-safe scheduler, a
dupefilter on disk, revalidation, and the migration of a JOBDIR."""
