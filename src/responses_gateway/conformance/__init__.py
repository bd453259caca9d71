"""Conformance checking of Responses API endpoints: the rules a stream must obey, and `responses-gateway check`.

The same checker runs in the test suite (on the gateway's own output and on recorded upstream traffic) and in
the command (on any server), so a rule fixed or added here applies to both.
"""
