"""Where the portal may send a request to an agent: the address filter and the pinned
connection (no Django here; the campaign driver on a GPU node uses it too).

An agent's URL is resolved once per connection. Every address the name resolves to must
be a public unicast address (loopback, private, shared, link-local, multicast, reserved,
unspecified and documentation ranges are refused, in IPv4, IPv6 and the IPv6 forms that
carry an IPv4 address), unless it lies in a network an admin allowed. The connection is
then made to that resolved address, never to the name again, so a DNS answer that changes
between the check and the connection (rebinding) cannot move it. Only http and https, and
only the allowed ports; redirects are not followed at all (the protocol client treats a
3xx as an error).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from evaluator.errors import UserError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORTS: tuple[int, ...] = (80, 443, 8080, 8443)
SCHEME_PORTS = {"http": 80, "https": 443}

# IPv6 prefixes that embed an IPv4 address (the IPv4 address is checked as well).
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class AgentURLError(UserError):
    """The endpoint's URL cannot be used as it is written (scheme, port, host)."""

    code = "agent:bad-url"


class UnsafeAddressError(UserError):
    """The endpoint's host resolves to an address the portal must not call."""

    code = "agent:unsafe-address"


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4, NAT64, Teredo)."""
    if address.version != 6:
        return None
    assert isinstance(address, ipaddress.IPv6Address)
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.teredo is not None:
        return address.teredo[1]
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or address in _IPV4_COMPATIBLE:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def rejection_reason(address: IPAddress) -> str | None:
    """Why the portal must not connect to ``address`` (None: a public unicast address)."""
    inner = embedded_ipv4(address)
    if inner is not None:
        if address.version == 6 and address in _IPV4_COMPATIBLE and int(inner) <= 1:
            # ::, ::1: the IPv6 unspecified and loopback addresses, not an embedded IPv4.
            inner = None
        else:
            reason = rejection_reason(inner)
            if reason:
                return f"{reason} (carried in the IPv6 address {address})"
            if address in _IPV4_COMPATIBLE and address.ipv4_mapped is None:
                return "a deprecated IPv4-compatible IPv6 address"
            return None
    checks = (
        ("is_unspecified", "an unspecified address"),
        ("is_loopback", "a loopback address"),
        ("is_link_local", "a link-local address"),
        ("is_multicast", "a multicast address"),
        ("is_private", "a private address"),
        ("is_reserved", "a reserved address"),
    )
    for attribute, reason in checks:
        if getattr(address, attribute):
            return reason
    if address.version == 6 and (address.is_site_local or address in _NAT64_LOCAL):
        return "a site-local address"
    if not address.is_global:
        # Shared address space (100.64/10), benchmarking, documentation, 6to4 relays ...
        return "an address that is not globally routable"
    return None


def parse_networks(entries: Iterable[str]) -> list[IPNetwork]:
    """Allowed networks from their text ("10.0.0.0/8", "127.0.0.1", "::1/128")."""
    return [ipaddress.ip_network(entry.strip(), strict=False) for entry in entries if entry]


def _normalise(address: IPAddress) -> IPAddress:
    if address.version == 6 and address.ipv4_mapped is not None:  # type: ignore[union-attr]
        return address.ipv4_mapped  # type: ignore[union-attr]
    return address


def address_allowed(address: IPAddress, networks: Iterable[IPNetwork]) -> bool:
    """Whether an admin allowed ``address`` (IPv4-mapped IPv6 matches IPv4 networks)."""
    plain = _normalise(address)
    return any(
        candidate.version == network.version and candidate in network
        for network in networks
        for candidate in {address, plain}
    )


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (``address``, pinned) and what to ask for."""

    scheme: str
    host: str
    port: int
    base_path: str
    address: str
    allowed_by_admin: bool

    def url(self, route: str) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path(route)}"

    def path(self, route: str) -> str:
        return self.base_path.rstrip("/") + "/" + route.lstrip("/")


Resolver = Callable[..., list]


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, base path) of an agent's URL; AgentURLError saying what is wrong."""
    text = (url or "").strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise AgentURLError(f"The URL {text!r} cannot be parsed: {exc}.") from exc
    scheme = parts.scheme.lower()
    if scheme not in SCHEME_PORTS:
        raise AgentURLError(
            f"The URL must start with http:// or https://, not {scheme or 'nothing'!r}."
        )
    if parts.username is not None or parts.password is not None:
        raise AgentURLError("The URL must not carry a user name or password.")
    if parts.query or parts.fragment:
        raise AgentURLError("The URL must not carry a query (?…) or a fragment (#…).")
    host = (parts.hostname or "").strip()
    if not host:
        raise AgentURLError(f"The URL {text!r} has no host.")
    return scheme, host, port or SCHEME_PORTS[scheme], parts.path or "/"


def resolve_target(
    url: str,
    *,
    allowed_networks: Iterable[IPNetwork] = (),
    allowed_ports: Iterable[int] = DEFAULT_PORTS,
    resolver: Resolver = socket.getaddrinfo,
) -> Target:
    """Check ``url`` and resolve its host to one address to pin.

    Every address the host resolves to is checked (a name that also resolves to a private
    address is refused, whichever address would be picked). An address in an admin-allowed
    network is accepted on any port; any other must be public and use an allowed port.
    """
    scheme, host, port, base_path = split_url(url)
    networks = list(allowed_networks)
    try:
        infos = resolver(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise AgentURLError(f"The host {host!r} cannot be resolved: {exc}.") from exc
    addresses: list[IPAddress] = []
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        address = ipaddress.ip_address(text)
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise AgentURLError(f"The host {host!r} resolves to no address.")
    allowed = [address_allowed(address, networks) for address in addresses]
    for address, by_admin in zip(addresses, allowed, strict=True):
        reason = None if by_admin else rejection_reason(address)
        if reason:
            raise UnsafeAddressError(
                f"The host {host!r} resolves to {address}, {reason}; the portal does not call "
                "such addresses. Use a public address, or ask an admin to allow this network "
                "for a development or on-premise agent."
            )
    if not all(allowed) and port not in set(allowed_ports):
        ports = ", ".join(str(p) for p in sorted(set(allowed_ports)))
        raise AgentURLError(f"Port {port} is not allowed for agents; use one of: {ports}.")
    return Target(
        scheme=scheme,
        host=host,
        port=port,
        base_path=base_path,
        address=str(_normalise(addresses[0])),
        allowed_by_admin=all(allowed),
    )


class PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to a fixed, already checked address (Host header: the name)."""

    def __init__(self, target: Target, *, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    """An HTTPS connection to a fixed address; the certificate is checked against the name."""

    def __init__(
        self, target: Target, *, timeout: float, context: ssl.SSLContext | None = None
    ) -> None:
        context = context or ssl.create_default_context()
        super().__init__(target.host, target.port, timeout=timeout, context=context)
        self._address = target.address
        self._ssl_context = context

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._ssl_context.wrap_socket(raw, server_hostname=self.host)


def pinned_connection(target: Target, *, timeout: float) -> http.client.HTTPConnection:
    """The connection for a checked target (HTTPS verifies the certificate)."""
    if target.scheme == "https":
        return PinnedHTTPSConnection(target, timeout=timeout)
    return PinnedHTTPConnection(target, timeout=timeout)
