"""The URL Frontier API (crawler-commons/url-frontier, 2.6) over gRPC
(``pip install 'crawlstore[urlfrontier]'``): ``urlfrontier.proto`` and the Python stubs
generated from it, ``urlfrontier_pb2`` (messages) and ``urlfrontier_pb2_grpc`` (service)."""
