"""Locust building blocks; imported only by loadtests/ (importing locust patches the process for gevent)."""
