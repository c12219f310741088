"""The LMDB storage: a store in one file."""
