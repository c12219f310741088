"""The key table of a store on Redis: every key's name, and the layout of every member.

Each key carries a hash tag, so that one function call touches one slot: the store's own
``{ns}``, a crawl's ``{ns:c}`` (``c``: the crawl's id), or one of a crawl's buckets
``{ns:c:b}``. A queue lives in the bucket its key hashes to; a URL (its record, validators and
seen entry) in the bucket of its fingerprint's first bits. A key's name is its tag and one of
the suffixes below; a queue's own keys add the queue's key in UTF-8.

| key | type | content |
|---|---|---|
| ``{ns}`` ``META`` | hash | format, buckets, created, crawl ids, store-wide defaults |
| ``{ns}`` ``CRAWLS`` | hash | crawl name -> id, policy, created |
| ``{ns}`` ``LOCK``, ``EPOCH``, ``JOURNAL``, ``FENCES`` | strings | the store lock (``unit.py``) |
| ``<tag>`` ``FENCE`` | string | the newest fence applied to the keys of hash tag ``<tag>`` |
| ``{ns:c}`` ``TOTALS`` | hash | the crawl's totals; ``~seq``, ``~seen``, ``~bloom`` |
| ``{ns:c}`` ``EVENTS`` | sorted set | the crawl's queues by next event (``EVENT_*``) |
| ``{ns:c}`` ``LOADS`` | sorted set | ``EVENTS`` by the queues' in-flight counts (``LOAD_*``) |
| ``{ns:c}`` ``WAKES`` | sorted set | the loaded queues by ``tend_at`` (``WAKE_*``) |
| ``{ns:c}`` ``QUEUE_KEYS`` | sorted set | the crawl's queue keys |
| ``{ns:c}`` ``STATE`` ``<name>``, ``STATE_NAMES`` | hashes | facade state, and its names |
| ``{ns:c:b}`` ``QUEUES`` | hash | queue key -> queue record |
| ``{ns:c:b}`` ``ENTRIES`` ``<queue>`` | sorted set | the queue's entries (``ENTRY_*``) |
| ``{ns:c:b}`` ``EXPIRIES`` ``<queue>`` | sorted set | the queue's lease expiries (``EXPIRY_*``) |
| ``{ns:c:b}`` ``SCHEDULE`` ``<queue>`` | sorted set | the queue's schedule (``SCHEDULED_*``) |
| ``{ns:c:b}`` ``MEMBERS`` ``<queue>`` | sorted set | the queue's URLs (fingerprints) |
| ``{ns:c:b}`` ``LEASES`` | hash | token -> lease |
| ``{ns:c:b}`` ``URLS`` | hash | fingerprint -> URL record |
| ``{ns:c:b}`` ``VALIDATORS`` | hash | fingerprint -> validators |
| ``{ns:c:b}`` ``SEEN`` | set | the exact seen set's fingerprints |
| ``{ns:c:b}`` ``BLOOM`` | string | a part of the Bloom seen set's bits |

Sorted set members are ordered by their bytes (every score is 0): each begins with what it is
ordered by, big-endian.

A store in partitions (format 2) keeps a crawl's partition data in the bucket of the queue, so
that a unit on a bucket reads and writes one slot and commits alone (``bucket.py``):

| key | type | content |
|---|---|---|
| ``{ns:c:b}`` ``VERSION`` | string | the bucket's version: each commit sets a new one |
| ``{ns:c:b}`` ``TOTALS`` | hash | the totals of the bucket's queues; ``~seq``, its sequence |
| ``{ns:c:b}`` ``EVENTS`` and the rest | sorted sets | the crawl's index, of the bucket's queues |
| ``{ns:c:b}`` ``URLS`` | hash | fingerprint -> URL record, of the bucket's queues |
| ``{ns:c:b}`` ``CLAIMS`` | hash | fingerprint (of the bucket) -> its URL's queue key |
| ``{ns:c:dN}`` ``DUE`` | sorted set | each bucket b (b % 16 = N) that held a queue, by next event |
| ``{ns:c:b}`` ``INBOX`` | hash | fingerprint -> a ``Post`` not folded yet; ``~r``...: refusals |
| ``{ns}`` ``WIDE_LOCK`` | string | the lock of a transaction over every bucket, on a cluster |
| ``{ns}`` ``META`` ``moving`` | field | the exports a move from format 1 loads (``migrate.py``) |
| ``{ns}`` ``POSTED`` | string | the version of posts in transactions (written, never read) |
| ``{ns:c}`` ``TOTALS`` | hash | what is no bucket's: refusals, view counts, ``~seen``, ``~bloom`` |
"""

from __future__ import annotations

# -- suffixes ------------------------------------------------------------------------------------
META = b":meta"
CRAWLS = b":crawls"
LOCK = b":lock"
EPOCH = b":epoch"
JOURNAL = b":journal"
FENCES = b":fence"
FENCE = b":f"
TOTALS = b":t"
EVENTS = b":x"
LOADS = b":xl"
WAKES = b":xw"
QUEUE_KEYS = b":k"
STATE = b":st:"
STATE_NAMES = b":sn"
QUEUES = b":q"
ENTRIES = b":p:"
EXPIRIES = b":e:"
SCHEDULE = b":s:"
MEMBERS = b":m:"
LEASES = b":l"
URLS = b":u"
VALIDATORS = b":v"
SEEN = b":se"
BLOOM = b":bl"
VERSION = b":V"
CLAIMS = b":w"
DUE = b":d"
INBOX = b":n"
POSTED = b":pv"
WIDE_LOCK = b":wl"
#: ``META`` ``moving`` while a store of format 2 gets the indexes of format 3 (``migrate.py``).
INDEXING = "the indexes of format 3 are being written"
#: A queue's own keys, deleted with it.
QUEUE_OWN = (ENTRIES, EXPIRIES, SCHEDULE, MEMBERS)

#: Fields of a crawl's ``TOTALS`` that are not totals: its sequence, its seen set's kind, its
#: Bloom filter's parameters.
SEQ, SEEN_KIND, BLOOM_PARAMS = b"~seq", b"~seen", b"~bloom"
NOT_A_TOTAL = b"~"

# -- members -------------------------------------------------------------------------------------
#: An ``EVENTS`` member: the event's ms, a sequence, then the queue's key.
EVENT_QUEUE = slice(16, None)
#: A ``LOADS`` member: the queue's in-flight count (u32), then its ``EVENTS`` member.
LOAD_PLACE = slice(4, 20)
LOAD_QUEUE = slice(20, None)
#: A ``WAKES`` member: the ms (u64) of the queue's ``tend_at``, then the queue's key.
WAKE_QUEUE = slice(8, None)
#: An ``ENTRIES`` member: the entry's order (rank, class, sequence: 13 bytes), the fingerprint.
ENTRY_FP = slice(13, None)
#: An ``EXPIRIES`` member: the expiry's ms, then the lease's token.
EXPIRY_TOKEN = slice(8, None)
#: A ``SCHEDULE`` member: the due ms, the sequence, the fingerprint, the exact due time.
SCHEDULED_FP = slice(16, 32)
SCHEDULED_AT = 32
