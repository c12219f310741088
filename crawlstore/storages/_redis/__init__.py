"""The Redis storage: a store on a Redis server or cluster (redis-py, the ``redis`` extra)."""
