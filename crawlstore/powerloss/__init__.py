"""Power-loss tests: record what a store writes, build every image a crash could leave, check
each (``crawlstore torture --power-loss``)."""
