"""Storages: where a store keeps its records, each behind the interface of ``frontier.spi``.

A storage module imports that interface, the shared record codecs of ``storages.records`` and
the value modules (``seed``, ``url``, ``errors``, ``journal``, ``clock``): never another
storage, and nothing above the interface.
"""
