"""The security suite uses the gateway suite's fixtures: a policy copy, a database, a gateway
wired to the loopback fake."""

from tests.gateway.conftest import db_path, gw, make_gateway, policy_dir

__all__ = ["db_path", "gw", "make_gateway", "policy_dir"]
