"""The operator console: read-only web pages over the memory store and the queue.

``memworker console`` serves it on loopback (:mod:`worker.web.server`); the pages
(:mod:`worker.web.app`) show the namespaces, a namespace's files and a search over its
memory, each file's history with its diffs, an entry's provenance (``memworker why``), the
queue's health and its dead letters. Every request needs the operator's HTTP basic
credentials (:mod:`worker.web.guard`); nothing can be changed from it.
"""
