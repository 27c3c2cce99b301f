"""Which JOSE library verifies strictcall's access tokens (issue 26): PyJWT against joserfc, the
same token verified with each (signature, `iss`, `aud`, `exp` with a leeway), in rounds taking
turns, for ES256 (P-256) and RS256 (2048-bit). Both are maintained and sit on `cryptography`;
authlib's JOSE is joserfc's predecessor, now deprecated in its favour.

    python bench/jose_libs.py [--rounds 7] [--calls 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from joserfc import jwt as jose_jwt
from joserfc.jwk import ECKey, RSAKey
from joserfc.jwt import JWTClaimsRegistry

ISSUER, AUDIENCE = "https://idp.example", "https://gw.example"


def verifiers(alg: str) -> dict[str, Callable[[], Any]]:
    """One token of `alg`, and a verification of it by each library."""
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "u1", "exp": now + 600, "iat": now}
    private: Any = (
        ec.generate_private_key(ec.SECP256R1())
        if alg == "ES256"
        else rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    token = jwt.encode(claims, private, algorithm=alg, headers={"kid": "k1"})
    public = private.public_key()
    key = (ECKey if alg == "ES256" else RSAKey).import_key(public)
    registry = JWTClaimsRegistry(
        iss={"essential": True, "value": ISSUER},
        aud={"essential": True, "value": AUDIENCE},
        leeway=30,
    )

    def with_pyjwt() -> Any:
        return jwt.decode(
            token, public, algorithms=[alg], audience=AUDIENCE, issuer=ISSUER, leeway=30
        )

    def with_joserfc() -> Any:
        decoded = jose_jwt.decode(token, key, algorithms=[alg])
        registry.validate(decoded.claims)
        return decoded.claims

    return {"PyJWT": with_pyjwt, "joserfc": with_joserfc}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    for alg in ("ES256", "RS256"):
        samples: dict[str, list[float]] = {}
        made = verifiers(alg)
        for _ in range(args.rounds):
            for name, verify in made.items():
                started = time.perf_counter_ns()
                for _ in range(args.calls):
                    verify()
                took = (time.perf_counter_ns() - started) / args.calls / 1000
                samples.setdefault(name, []).append(took)
        line = ", ".join(f"{name} {statistics.median(s):.0f} µs" for name, s in samples.items())
        print(f"{alg}: {line} per verification (median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
