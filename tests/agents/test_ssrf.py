"""The address filter and the pinned connection. Nothing here connects anywhere but
loopback: names are resolved by a stand-in resolver or are literals and ``localhost``."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from agents.protocol import AgentClient, AgentRedirect, Limits
from agents.ssrf import (
    AgentURLError,
    UnsafeAddressError,
    parse_networks,
    rejection_reason,
    resolve_target,
)

REJECTED = [
    # IPv4
    "127.0.0.1",
    "127.255.1.2",
    "0.0.0.0",
    "10.1.2.3",
    "172.16.5.4",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",  # cloud metadata
    "100.64.0.1",  # shared address space (carrier NAT)
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.2.10",  # documentation
    "198.18.0.1",  # benchmarking
    # IPv6
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "ff02::1",
    "fec0::1",  # site-local
    "2001:db8::1",  # documentation
    # IPv6 forms that carry a rejected IPv4 address
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::127.0.0.1",  # IPv4-compatible
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
]
ACCEPTED = ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize("text", REJECTED)
def test_non_public_addresses_are_rejected(text):
    assert rejection_reason(ipaddress.ip_address(text)) is not None


@pytest.mark.parametrize("text", ACCEPTED)
def test_public_unicast_addresses_pass(text):
    assert rejection_reason(ipaddress.ip_address(text)) is None


def resolver_for(mapping: dict[str, list[str]]):
    """A stand-in for getaddrinfo: names to fixed addresses, no DNS."""

    def resolve(host, port, **kwargs):
        if host not in mapping:
            raise socket.gaierror(f"unknown host {host}")
        return [
            (
                socket.AF_INET6 if ":" in a else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (a, port),
            )
            for a in mapping[host]
        ]

    return resolve


@pytest.mark.parametrize("address", REJECTED)
def test_a_name_resolving_to_a_rejected_address_is_refused(address):
    with pytest.raises(UnsafeAddressError, match="does not call"):
        resolve_target(
            "https://agent.example.test/", resolver=resolver_for({"agent.example.test": [address]})
        )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost:8080/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://2130706433/",  # 127.0.0.1 written as one number
        "http://0177.0.0.1/",  # octal
        "http://0x7f.1/",  # hexadecimal, short form
        "http://0.0.0.0:80/",
        "http://[fe80::1]/",
    ],
)
def test_literal_and_encoded_loopback_urls_are_refused(url):
    with pytest.raises((UnsafeAddressError, AgentURLError)):
        resolve_target(url)


def test_any_private_answer_among_several_refuses_the_name():
    # DNS that answers a public and a private address must not get the private one used.
    resolver = resolver_for({"mixed.example.test": ["8.8.8.8", "10.0.0.7"]})
    with pytest.raises(UnsafeAddressError, match="10.0.0.7"):
        resolve_target("https://mixed.example.test/", resolver=resolver)


def test_a_public_name_is_pinned_to_its_resolved_address():
    resolver = resolver_for({"agent.example.test": ["8.8.4.4"]})
    target = resolve_target("https://agent.example.test/v1/", resolver=resolver)
    assert (target.address, target.port, target.host) == ("8.8.4.4", 443, "agent.example.test")
    assert target.path("kernel") == "/v1/kernel"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://agent.example.test/", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("gopher://agent.example.test/", "http:// or https://"),
        ("agent.example.test/kernel", "http:// or https://"),
        ("https://user:pw@agent.example.test/", "user name or password"),
        ("https://agent.example.test:22/", "Port 22 is not allowed"),
        ("https://agent.example.test/?next=x", "query"),
        ("https:///nohost", "no host"),
        ("https://agent.example.test:99999/", "cannot be parsed"),
    ],
)
def test_urls_the_portal_will_not_call(url, message):
    resolver = resolver_for({"agent.example.test": ["8.8.8.8"]})
    with pytest.raises(AgentURLError, match=message):
        resolve_target(url, resolver=resolver)


def test_an_admin_allowed_network_admits_a_private_agent_on_any_port():
    networks = parse_networks(["10.20.0.0/16"])
    resolver = resolver_for({"gpu-box.lan": ["10.20.3.4"], "other.lan": ["10.21.0.1"]})
    target = resolve_target(
        "http://gpu-box.lan:9000/", allowed_networks=networks, resolver=resolver
    )
    assert target.address == "10.20.3.4" and target.allowed_by_admin
    with pytest.raises(UnsafeAddressError):
        resolve_target("http://other.lan:9000/", allowed_networks=networks, resolver=resolver)


def test_an_allowed_ipv4_network_also_admits_its_ipv6_mapped_form():
    networks = parse_networks(["127.0.0.1/32"])
    target = resolve_target("http://[::ffff:127.0.0.1]:5000/", allowed_networks=networks)
    assert target.address == "127.0.0.1"


def test_the_connection_goes_to_the_pinned_address_with_the_name_as_host(scripted_agent):
    # "agent.example.test" does not exist in DNS: reaching the loopback agent proves that
    # the connection used the address checked at resolution, not a second lookup.
    agent = scripted_agent(lambda hit, i: (200, {}, b'{"status": "ok"}'))
    from agents import ssrf

    resolver = resolver_for({"agent.example.test": ["127.0.0.1"]})
    target = ssrf.resolve_target(
        f"http://agent.example.test:{agent.port}/x/",
        allowed_networks=parse_networks(["127.0.0.1"]),
        resolver=resolver,
    )
    connection = ssrf.pinned_connection(target, timeout=5)
    connection.request("GET", target.path("health"))
    assert connection.getresponse().status == 200
    connection.close()
    assert agent.hits[0].headers["Host"] == f"agent.example.test:{agent.port}"
    assert agent.hits[0].path == "/x/health"


def test_redirects_are_not_followed(scripted_agent):
    elsewhere = scripted_agent(lambda hit, i: (200, {}, b'{"status": "ok"}'))
    agent = scripted_agent(lambda hit, i: (302, {"Location": elsewhere.url + "/health"}, b""))
    client = AgentClient(
        base_url=agent.url,
        secret=b"s",
        limits=Limits(seconds_per_call=5, max_response_bytes=4096, retries=0),
        allowed_networks=parse_networks(["127.0.0.1"]),
    )
    with pytest.raises(AgentRedirect, match="does not follow redirects"):
        client.health()
    assert elsewhere.hits == []


def test_loopback_is_refused_by_the_client_without_an_allow_list(scripted_agent):
    agent = scripted_agent(lambda hit, i: (200, {}, b'{"status": "ok"}'))
    client = AgentClient(
        base_url=agent.url,
        secret=b"s",
        limits=Limits(seconds_per_call=5, max_response_bytes=4096, retries=0),
    )
    with pytest.raises(UnsafeAddressError, match="loopback"):
        client.health()
    assert agent.hits == []
