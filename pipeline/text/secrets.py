"""Secret and credential detector: provider tokens in their documented formats (the table of
pipeline/text/secret_tokens.py: by their prefix, or, for a format without one, after a name
holding the provider's keyword), private keys (PEM, OpenSSH, PGP, PuTTY), JWTs, passwords in
connection URLs (also with an empty user: `redis://:pw@host`), on command lines (`mysql -p…`,
`curl -u user:…`, `--password …`), in `Authorization: Basic/Bearer` headers and signed URLs
(`sig=`, `X-Amz-Signature=`), told in a sentence in English, German, Spanish or French ("my
password is …", "das Passwort lautet …"), and high-entropy values assigned to secret-like
names in every common syntax (shell, dotenv, INI, TOML, YAML, JSON also escaped in a string,
XML elements and attribute pairs, Makefile, Python, JS/TS, Go, Java/Kotlin/C#, PHP, Ruby,
environment setters such as `System.setProperty("X_TOKEN", "…")`).

Not reported: placeholders and templates, values assigned to names that say they are test
fixtures (`FAKE_API_KEY`, `testPassword`, `mock_token`), and credentials published as
examples (PUBLISHED_EXAMPLES: exact values, by hash, with their sources).

Two vectorized polars passes select the rows that may hold a secret (an alternation of the
rules' patterns, and one of the tokens' literal prefixes and keywords, run side by side); only
those go through Python `re`
for exact offsets and the checks that keep look-alikes out: placeholders and environment
references, AWS's documented example keys, low-entropy values, JWT headers that are not
JSON, Discord tokens whose first part is not a user id. Git SHAs, digests, lockfile
integrity hashes, UUIDs and base64 image data match no rule unless assigned to a secret-like
name (a real key may be a UUID or hex). See pipeline/text/text_scan.py for the machinery.

An AWS secret access key (40 characters of base64) is also found without its name: within
120 characters after an access key id (AKIA/ASIA) on the same line, or after `aws secret`,
`secret key`, `secret_key`, `secret access key`, … (any case, then `:`, `=` or whitespace).
There the value must stand alone (not part of a longer base64 run), must not be 40 hex
digits (git SHAs, sha1 digests), and needs AWS_SECRET_MIN_ENTROPY and both letter cases.

Spans of assigned values and URL passwords cover the whole value, so that masking never
leaves part of a secret in clear:
- a quoted value (`password = "..."`, `'...'`) runs to its closing quote, backslash escapes
  honoured (`"a\\"b"` is one value); a quoted value holding whitespace or a line end is not
  reported (prose, messages, templates);
- an unquoted value runs to the next whitespace, `,`, `;`, closing bracket (`)`, `]`, `}`,
  `>`) or `&` that starts another `name=` (a query string); any other character belongs to
  it (`\\`, `"`, `$`, `%`, `:`, non-ASCII letters), except quotes at its very end, which
  close an enclosing string (`"--password=..."`). An unquoted value holding `(`, `[`, `{` or
  `://`, or that is a dotted name (`settings.API_KEY_V2`), is code or a URL, not reported
  (`b'...'`, a prefixed string literal, too);
- a URL password runs from the `:` after the user to the last `@` before the host (a raw
  `@` in a password is part of it), stopping at whitespace and `/`.

Minimum lengths. Assigned values (the `generic_secret_assignment` type: `password=`,
`secret:`, `api_key = "..."`, ...) are reported only from 8 characters on, and only with at
least GENERIC_MIN_ENTROPY (3.0) bits per character, which takes at least 8 distinct
characters (k distinct characters give at most log2(k) bits); unquoted values also need a
digit or a symbol. So `password=hunter2` (7 characters) and `password=hunter22` (7 distinct)
are not reported. The reason is false positives: the words after `password:` or `token =`
in prose, docs, forms and code are mostly short words, identifiers and defaults
(`password: required`, `token = tok`, `secret=admin1`), and at these lengths a real password
cannot be told from them by its characters. A password in a connection URL has no minimum
length: the URL's syntax is the evidence (it must not be the user name, a default or a
placeholder).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable

import polars as pl

from pipeline.text.secret_tokens import TOKEN_FORMATS, TokenFormat, base62_crc32
from pipeline.text.text_scan import Rule, SpanScanner, replace_spans

LEAD_CHARS = 4
GENERIC_MIN_ENTROPY = 3.0  # bits per character; random base64/hex of length 16+ is ~3.5–4.5
TOKEN_MIN_ENTROPY = 3.0
# What follows a provider's literal prefix: the prefix is the evidence, the floor only keeps
# out runs and patterns (`0000…`, `abcabc…`). Random bodies do fall below 3 bits (16 of 36
# characters: 2.27 at the least in 200k draws; 19 hex digits: 2.21), never near 2.
PREFIXED_TOKEN_MIN_ENTROPY = 2.0
# An AWS secret key found by its context only (see _AWS_SECRET_VALUE): 40 random base64
# characters carry 4.2 bits per character and more (none below 4.15 in 200k draws); 40 hex
# digits (a git SHA, a sha1 digest) at most 4, prose and paths of words about 3.9.
AWS_SECRET_MIN_ENTROPY = 4.0

# Words that mark a value as a stand-in rather than a credential (compared lowercased).
_PLACEHOLDER_WORDS = (
    "example", "changeme", "change_me", "change-me", "placeholder", "your", "xxxx", "redacted",
    "dummy", "sample", "****", "<", ">", "${", "{{", "here", "replace", "insert", "environ",
    "getenv", "none", "null", "undefined", "#{", "%{", "&lt", "&gt", "...", "…",
)  # fmt: skip
# Values people leave in docs and local set-ups (compared lowercased).
_DEFAULT_PASSWORDS = frozenset((
    "password", "passwd", "pass", "pwd", "secret", "changeme", "admin", "root", "test", "guest",
    "postgres", "mysql", "user", "username", "letmein", "default", "qwerty",
))  # fmt: skip


_PRINTF_FORMAT = re.compile(r"%(?:\([A-Za-z_][A-Za-z0-9_]*\))?[sdifr]")
_WORDS = re.compile(r"[A-Za-z][a-z]*(?:[\-_. ][A-Za-z][a-z]*)*|[A-Z]+(?:[\-_. ][A-Z]+)*")


def shannon_entropy(value: str) -> float:
    """Bits per character of `value`'s character distribution."""
    if not value:
        return 0.0
    counts = Counter(value).values()
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts)


def is_placeholder(value: str) -> bool:
    """An environment reference, template, mask or documented stand-in, not a secret."""
    lowered = value.lower()
    return (
        value.startswith("$")
        or _PRINTF_FORMAT.match(value) is not None
        or len(set(value)) <= 2
        or lowered in _DEFAULT_PASSWORDS
        or any(word in lowered for word in _PLACEHOLDER_WORDS)
    )


def _value(match: re.Match[str]) -> str:
    return match.group("v") if "v" in match.re.groupindex else match.group()


def _not_example(match: re.Match[str]) -> bool:
    return "EXAMPLE" not in _value(match).upper()


def _random_token(match: re.Match[str]) -> bool:
    value = _value(match)
    return _not_example(match) and shannon_entropy(value) >= TOKEN_MIN_ENTROPY


_X_RUN = re.compile(r"[xX]{4,}")


def _stand_in(value: str) -> bool:
    """A value of a token's alphabet that says it is not one: `…EXAMPLE…`, or a run of `x`
    of 8 or more, or of 4 or more that is a quarter of it (`ghp_xxxx…`, `AKIAXXXX…`, the
    masked `…xxxxxxxx`); not `here` or `none`, which a random value holds about once in
    25,000, nor a short run inside a long one."""
    longest_x_run = max((len(run) for run in _X_RUN.findall(value)), default=0)
    return (
        "EXAMPLE" in value.upper()
        or longest_x_run >= 8
        or (longest_x_run >= 4 and longest_x_run * 4 >= len(value))
    )


def _random_after(prefix: int) -> Callable[[re.Match[str]], bool]:
    """A provider token's check: what follows its literal prefix is random, not a stand-in
    (`ghp_xxxx…`, `…EXAMPLE…`)."""

    def random_body(match: re.Match[str]) -> bool:
        body = match.group()[prefix:]
        return not _stand_in(body) and shannon_entropy(body) >= PREFIXED_TOKEN_MIN_ENTROPY

    return random_body


_random_after_4 = _random_after(4)  # gh?_, npm_, AKIA


def _checksummed(match: re.Match[str]) -> bool:
    """GitHub's and npm's tokens of 4 + 36 characters end with a checksum of the 30 before
    it: one that does not hold is a made-up token (docs, tests, a typo), not a credential.
    Longer GitHub tokens (older server-to-server and refresh tokens) are judged as random."""
    token = match.group()
    if len(token) != 40:
        return _random_after_4(match)
    return token[-6:] == base62_crc32(token[4:34]) and _random_after_4(match)


def _aws_secret_in_context(match: re.Match[str]) -> bool:
    """A 40-character value found by its surroundings alone (near an access key id, after
    `secret key`), not by a name that says what it is: besides the token checks, no
    placeholder, both letter cases and not only letters (a CamelCase name, a path of words),
    and AWS_SECRET_MIN_ENTROPY (a random key has about 4.7 bits per character)."""
    value = _value(match)
    return (
        _random_token(match)
        and not is_placeholder(value)
        and shannon_entropy(value) >= AWS_SECRET_MIN_ENTROPY
        and re.search(r"[a-z]", value) is not None
        and re.search(r"[A-Z]", value) is not None
        and re.fullmatch(r"[A-Za-z]+", value) is None
    )


# A quoted name that is a call's first argument: `setProperty("DB_PASSWORD", …)`; a keyword
# argument after it is code.
_KEYWORD_ARGUMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_CALL_OPENING = re.compile(r"""\(\s*\\?["'][A-Za-z0-9_.\-]*\Z""")


def _random_secret(match: re.Match[str]) -> bool:
    value = _value(match)
    name = match.group()[: match.start("v") - match.start()]
    if "," in name:  # a call's second argument: `setProperty("DB_PASSWORD", "…")`
        if not _CALL_OPENING.search(match.string, max(0, match.start() - 80), match.start()):
            return False  # a list of strings (`"tokens", "symbol2label"`), not a call
        if _KEYWORD_ARGUMENT.match(value):
            return False  # `delenv("API_TOKEN", raising=False)`
    return (
        not is_placeholder(value)
        and not _WORDS.fullmatch(value)
        and shannon_entropy(value) >= GENERIC_MIN_ENTROPY
        and value.lower() not in name.lower()
        and not _named_as_fixture(match)
    )


# An unquoted value that is code or a URL: a call, an index, a template, `a.b.c`, a prefixed
# string literal (`b'...'`: its quoted part is not found unquoted either).
_CODE_VALUE = re.compile(
    r"[(\[{]|://|^[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+$|^[bBrRuUfF]{1,2}[\"'`]"
)


def _random_bare_secret(match: re.Match[str]) -> bool:
    """Unquoted values are also code (`token = next_token`, `key = get_key(user_id=42)`):
    ask for a digit or a symbol, and no call, index, template, URL or dotted name."""
    value = _value(match)
    return (
        _random_secret(match)
        and re.search(r"[0-9+/=~!@#%^&*\-]", value) is not None
        and _CODE_VALUE.search(value) is None
    )


def _url_password(match: re.Match[str]) -> bool:
    """The user part may be empty (`redis://:password@host`); the password may not be the
    user name, a default or a placeholder."""
    password = match.group("v")
    return password != match.group("user") and not is_placeholder(password)


def _b64decode(part: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        return None


def _jwt_header_is_json(match: re.Match[str]) -> bool:
    header = _b64decode(match.group().split(".", 1)[0])
    return header is not None and header.startswith(b'{"') and b'"alg"' in header


def _discord_user_id(match: re.Match[str]) -> bool:
    """A bot token starts with the bot's user id (a snowflake of 17–20 digits) in base64."""
    user_id = _b64decode(match.group().split(".", 1)[0])
    return user_id is not None and user_id.isdigit() and 17 <= len(user_id) <= 20


def _pypi_macaroon(match: re.Match[str]) -> bool:
    """A PyPI token is a version-2 macaroon in base64 (its location, `pypi.org`, is the fixed
    prefix): it ends with the signature field, type 6 and 32 bytes, after the end of the last
    section (https://github.com/rescrv/libmacaroons/blob/master/doc/format.txt)."""
    data = _b64decode(match.group()[len("pypi-") :])
    return data is not None and data[0] == 2 and data[-35:-32] == b"\x00\x06\x20"


def _pem_body(match: re.Match[str]) -> bool:
    """Enough base64 between the labels to be a key, not a label quoted in code or docs."""
    body = match.group().split("-----")[2].replace("\\n", "")
    return len(re.findall(r"[A-Za-z0-9+/]", body)) >= 64 and "EXAMPLE" not in body.upper()


# Token boundaries: not glued to a longer run of the same alphabet.
_B = r"(?<![A-Za-z0-9_\-])"
_E = r"(?![A-Za-z0-9_\-])"
# `=`, `:` and the assignments of Makefiles (`:=`, `::=`, `:::=`, `?=`, `+=`), PHP (`.=`,
# `??=`), Perl and Ruby (`=>`), after an optional type (`apiKey: string =`, Go's
# `var apiKey string =`); the name may be quoted (also escaped inside a JSON string:
# `{\"api_key\": \"…\"}`) or an index (`os.environ["API_KEY"] =`, `ENV["TOKEN"] =`), and a
# quoted name may be a call's first argument (`System.setProperty("DB_PASSWORD", "…")`).
_NAME_END = r"""(?:\\?["'])?\]?(?:[ \t]*:?[ \t]*(?:string|String|str)\b)?"""
_OPERATORS = r"=>|:::=|::=|:=|\?\?=|\?=|\+=|\.=|=|:"
_ASSIGN = _NAME_END + rf"""[ \t]*(?:{_OPERATORS}|(?<=[\"'])[ \t]*,)[ \t]*"""
# The name must end with the secret word: DB_PASSWORD, client_secret, but not token_type.
_SECRET_NAME = (
    r"(?i:passwords?|passwd|pwd|passphrase|secrets?|api[_\-]?keys?|apikeys?|access[_\-]?keys?"
    r"|auth[_\-]?tokens?|access[_\-]?tokens?|tokens?|credentials?|private[_\-]?keys?)"
)
_SECRET_NAME_ANCHORS = (
    "pass",
    "pwd",
    "secret",
    "api",
    "access",
    "auth",
    "token",
    "credential",
    "private",
)
# Whitespace as both engines see it (Python `re.ASCII`'s `\s` is ASCII only, Rust's is not):
# spelled out, so that the Rust form of a value class stays a superset of the Python form.
_SPACE = r" \t\n\r\f\v\x1c-\x1f\x85\xa0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff"


def _quoted_value(quote: str) -> str:
    """To the closing quote, backslash escapes honoured; no whitespace (prose, templates)."""
    return rf"{quote}(?P<v>(?:[^{quote}\\{_SPACE}]|\\[^{_SPACE}]){{8,}}){quote}"


_QUOTES = "\"'`"
# An unquoted value ends at whitespace, `,`, `;`, a closing bracket, or an `&` that starts
# another `name=` (a query string); trailing quotes close an enclosing string.
_BARE_CHAR = rf"(?:[^{_SPACE},;&)\]}}>]|&(?![A-Za-z_][A-Za-z0-9_.\-]*=))"
_BARE_VALUE = rf"(?P<v>(?![{_QUOTES}]){_BARE_CHAR}{{8,}}(?<![{_QUOTES}]))"
_DB_SCHEMES = (
    r"(?i:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver"
    r"|oracle|cockroachdb|clickhouse|jdbc:[a-z]+|s?ftp|smtps?|ldaps?|https?)"
)
# AWS secret access keys found by their context rather than by their name: the 40 characters
# after an access key id on the same line (prose, the credentials CSV `AKIA…,secret`), or
# after `aws secret`, `secret key`, `secret_key`, `aws_secret`, `secret access key`, …. The
# value may not be glued to a longer run of base64 or URL-safe base64 (nor follow a `.`: a
# JWT part), nor be 40 hex digits (a git SHA or sha1 digest: ruled out in the pattern, so
# that one next to an access key id does not hide a key after it).
_AWS_SECRET_VALUE = (
    r"(?![0-9a-f]{40})(?![0-9A-F]{40})(?P<v>[A-Za-z0-9/+]{40})"
    r"(?![A-Za-z0-9/+=_\-])(?!\.[A-Za-z0-9])"
)
_AWS_KEY_ID_NEAR = r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b.{0,120}?(?<![A-Za-z0-9/+_.\-])"
_AWS_SECRET_WORDS = (
    r"(?i:aws[ _\-]?secret(?:[ _\-]?access)?(?:[ _\-]?key)?|secret[ _\-]?(?:access[ _\-]?)?key)"
    r"""["']?(?:[ \t]*(?:=>|:=|=|:)[ \t]*|[ \t]+)["']?"""
)

# A keyed provider value (see secret_tokens.py) after a name holding the provider's keyword:
# the rest of the name, then an assignment in any syntax (_ASSIGN's, an XML element's `>`
# with the value on the same or the next line, a call's `"NAME", "…"`) or a command-line
# flag's space (`--datadog-api-key …`), then an optional quote (escaped inside JSON too).
_KEYED_NAME_REST = r"[A-Za-z0-9_.\-]{0,40}?"
_KEYED_ASSIGN = (
    _NAME_END + rf"(?:[ \t]*(?:{_OPERATORS}|>|,)[ \t\r\n]*|[ \t]+)" + r"""(?:\\?["'`])?"""
)
# The name must say it holds a credential (`DATADOG_API_KEY`, `twilioAuthToken`), so that an
# id next to a provider's name (`datadog trace_id: <hex>`, `heroku app: <uuid>`) is not one.
_CREDENTIAL_NAME = re.compile(r"key|token|secret|pass|pwd|auth|cred|[_\-.]pat\b|\bpat[_\-]", re.I)
KEYED_MIN_ENTROPY = 2.5  # bits per character of the value (no prefix vouches for it)


def _keyed_value(match: re.Match[str]) -> bool:
    value = _value(match)
    name = match.string[match.start() : match.start("v")]
    return (
        _CREDENTIAL_NAME.search(name) is not None
        and not _stand_in(value)
        and len(set(value)) > 2
        and shannon_entropy(value) >= KEYED_MIN_ENTROPY
    )


def _keyed_rule(token: TokenFormat) -> Rule:
    spellings = token.keyword_spellings
    pattern = f"(?i:{'|'.join(map(re.escape, spellings))})" + _KEYED_NAME_REST + _KEYED_ASSIGN
    # a value of base64 ends where no base64 follows: a longer one is not cut short (the
    # generic rule then reports it whole)
    b64 = any(not isinstance(part, str) and "+/" in part[0] for part in token.parts)
    end = r"(?![A-Za-z0-9_\-+/=])" if b64 else _E
    return Rule(token.type, pattern + f"(?P<v>{token.pattern})" + end, _keyed_value,
                keywords=spellings)  # fmt: skip


def _token_rule(token: TokenFormat) -> Rule:
    if token.keywords:
        return _keyed_rule(token)
    # A token starting with its literal is tried only where the literal occurs (Python `re`
    # skips no text for a pattern starting with a lookbehind).
    anchors = (token.prefix.lower(),) if token.prefix and token.prefix == token.literal else ()
    return Rule(token.type, _B + token.pattern + _E, _random_after(len(token.prefix)),
                literal=token.literal, anchors=anchors)  # fmt: skip


# Credentials published as examples, matched by the SHA-256 of their exact value (so that the
# repository holds none of them in clear), with where each is published. A documented key
# that says what it is (`…EXAMPLE…`, `xxxx`) needs no entry: no rule accepts it.
PUBLISHED_EXAMPLES: dict[str, str] = {
    "1a5d44a2dca19669d72edf4c4f1c27c4c1ca4b4408fbb17f6ce4ad452d78ddb3": "https://docs.aws.amazon.com/IAM/latest/UserGuide/security-creds.html",
    "78314b11be2e581549ac1c4f616563fad3fdf0c3b71678f6e2299182080e0598": "https://docs.aws.amazon.com/IAM/latest/UserGuide/security-creds.html",
    "7f75367e7881255134e1375e723d1dea8ad5f6a4fdb79d938df1f1754a830606": "https://jwt.io/ (the debugger's example token)",
    "2cafc0970149a84f3b9e62eaf169f36f59907a3b3e31f7b82e68c69cd27f7326": "https://docs.stripe.com/api/authentication (the documentation's test key)",
    "f2d6ca16515033e5dce14eba840b979d27b5cbae24bb3e5bf484339667f86397": "https://docs.stripe.com/api (the older documentation's test key)",
    "2ddc147f3a3b5a1722b8ed6be3c45c49a7156b17fca5d11410137a6d04def6eb": "https://api.slack.com/authentication/token-types (the documentation's bot token)",
    "ac9265e56c79b234607ec72c53753cfea9f88c99eb713790ddf9be5593bb4465": "https://developers.google.com/maps/documentation/javascript (the samples' API key)",
    "0011cc25eb4320717494d2703e8cba85743e71b500283c21c8b88147992f9059": "https://learn.microsoft.com/azure/storage/common/storage-use-azurite#http-connection-strings (the storage emulator's well-known account key)",
    "60a09e4357868c1e9b801052726d061c370429f723db84523ed58ac354f6eb8a": "https://hardhat.org/hardhat-network/docs/reference#initial-state (Hardhat's and Anvil's first well-known test account)",
}  # fmt: skip


def is_published_example(value: str) -> bool:
    return hashlib.sha256(value.encode()).hexdigest() in PUBLISHED_EXAMPLES


def _vetted(rule: Rule) -> Rule:
    """The rule, refusing published examples besides what its own check refuses."""
    check = rule.accept

    def accept(match: re.Match[str]) -> bool:
        return (check is None or check(match)) and not is_published_example(_value(match))

    return dataclasses.replace(rule, accept=accept)


# Names that say a value is made up for tests or docs (`FAKE_API_KEY`, `testPassword`,
# `mock_token`, `example_secret`): segments of the name, split at `_`, `-`, `.` and case.
_FIXTURE_WORDS = frozenset(
    ("fake", "dummy", "mock", "mocked", "fixture", "fixtures", "test", "tests", "testing",
     "sample", "example", "stub", "bogus")
)  # fmt: skip
_NAME_BEFORE = re.compile(r"[A-Za-z0-9_.\-]*\Z")
_NAME_SEGMENT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def _named_as_fixture(match: re.Match[str]) -> bool:
    start = match.start()
    before = _NAME_BEFORE.search(match.string, max(0, start - 60), start)
    name = (before.group() if before else "") + match.group()[: match.start("v") - start]
    return any(word.lower() in _FIXTURE_WORDS for word in _NAME_SEGMENT.findall(name))


_ENDS_WITH_SECRET_NAME = re.compile(_SECRET_NAME + r"\Z")


def _element_name_is_secret(match: re.Match[str]) -> bool:
    """`<dbPassword>`, `<api_key>`, not `<monkey>` or `<keys>` of a dictionary."""
    opening = match.string.rfind("<", max(0, match.start() - 60), match.start())
    name = match.string[opening + 1 : match.start("v")].rstrip(" \t\r\n>")
    return opening >= 0 and _ENDS_WITH_SECRET_NAME.search(name) is not None


def _xml_secret(match: re.Match[str]) -> bool:
    return _element_name_is_secret(match) and _random_secret(match)


def _attribute_pair_secret(match: re.Match[str]) -> bool:
    """`<add key="DbPassword" value="…"/>`: the key attribute names a secret."""
    return _ENDS_WITH_SECRET_NAME.search(match.group("n")) is not None and _random_secret(match)


def _told_secret(match: re.Match[str]) -> bool:
    """A credential in a sentence: not a placeholder, a default or words ("the token is
    expired"), a digit or a symbol in it (a password, not a word) and a letter (digits alone
    are a one-time code or a PIN: "your password for wap.example.com is 391784")."""
    value = _value(match)
    return (
        not is_placeholder(value)
        and re.search(r"[A-Za-z]", value) is not None
        and not _WORDS.fullmatch(value)
        and re.search(r"[0-9!#$%&*+/=?@^_~\-]", value) is not None
        and _CODE_VALUE.search(value) is None
        and shannon_entropy(value) >= 2.0
    )


def _basic_credentials(match: re.Match[str]) -> bool:
    """`Authorization: Basic <base64 of user:password>` with a real password in it."""
    try:
        decoded = base64.b64decode(match.group("v"), validate=True).decode()
    except (binascii.Error, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return (
        bool(colon)
        and decoded.isprintable()
        and bool(password)
        and password != user
        and not is_placeholder(password)
    )


def _bearer_token(match: re.Match[str]) -> bool:
    value = _value(match)
    return (
        not is_placeholder(value)
        and not _stand_in(value)
        and re.search(r"[0-9]", value) is not None
        and shannon_entropy(value) >= TOKEN_MIN_ENTROPY
    )


def _command_password(match: re.Match[str]) -> bool:
    password = match.group("v")
    user = match.group("user") if "user" in match.re.groupindex else None
    return password != user and not is_placeholder(password)


def _putty_key(match: re.Match[str]) -> bool:
    return "Private-Lines:" in match.group()


# A credential told in a sentence (at most 128 characters: a bound keeps a text of many
# keywords and no spaces linear): "my password is …", "the password for the admin account
# was …", "das Passwort lautet …", "mi contraseña es …", "le mot de passe est : …"; also
# "Kennwort: …" in the other languages (an English `password: …` is an assignment, and
# `secret key: <sha1>` in a changelog is not a key). The value ends before the sentence's
# punctuation.
_TOLD_NAMES_EN = ("password", "passphrase", "api key", "secret key", "access key")
_TOLD_NAMES_OTHER = (
    "passwort", "kennwort", "contraseña", "contrasena", "clave", "mot de passe", "jeton",
)  # fmt: skip
_TOLD_NAMES = _TOLD_NAMES_EN + _TOLD_NAMES_OTHER
_TOLD_FOR = r"(?:[ \t]+(?i:for|of|to|für|von|zu|para|de|del|pour|du)(?:[ \t]+[^\s]+){1,4}?)?"
_TOLD_VERB = r"[ \t]+(?i:is|was|ist|lautet|war|es|era|est|était)[ \t]*:?"
_TOLD_VALUE = (
    r"""[ \t]*["'`“”«»„]?[ \t]*"""
    r"""(?P<v>[^\s"'`“”«»]{5,127}?[^\s"'`“”«».,!?;:)])(?=[.,!?;:)"'`“”«»]*(?:\s|$))"""
)
_TOLD = (
    rf"(?:(?i:{'|'.join(map(re.escape, _TOLD_NAMES_EN))}){_TOLD_FOR}{_TOLD_VERB}"
    rf"|(?i:{'|'.join(map(re.escape, _TOLD_NAMES_OTHER))}){_TOLD_FOR}(?:[ \t]*:|{_TOLD_VERB}))"
    + _TOLD_VALUE
)
# "the token is …" (not after a `for` clause: `token` is a common word in code and docs).
_TOLD_TOKEN = r"(?i:token is|token was)[ \t]*:?" + _TOLD_VALUE
_XML_CLOSERS = tuple(
    f"{name}>" for name in ("password", "passwords", "passwd", "pwd", "passphrase", "secret",
                             "secrets", "key", "keys", "token", "tokens", "credential",
                             "credentials")
)  # fmt: skip
_PEM_BEGIN = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"

RULES: tuple[Rule, ...] = (
    Rule("private_key",
         _PEM_BEGIN + r"[A-Za-z0-9+/=:,.\- \t\r\n\\]+?" + _PEM_END, _pem_body),
    Rule("aws_access_key_id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b", _random_after_4),
    Rule("aws_secret_access_key",
         r"(?i:aws[A-Za-z0-9_\-]{0,20}secret[A-Za-z0-9_\-]{0,20}|secret_?access_?key)" + _ASSIGN
         + r"""["']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])""", _random_token),
    Rule("aws_secret_access_key", _AWS_SECRET_WORDS + _AWS_SECRET_VALUE, _aws_secret_in_context,
         ("aws", "secret")),
    Rule("aws_secret_access_key", _AWS_KEY_ID_NEAR + _AWS_SECRET_VALUE, _aws_secret_in_context,
         ("akia", "asia")),
    Rule("github_fine_grained_token", _B + r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}" + _E),
    Rule("github_token", _B + r"gh[pousr]_[A-Za-z0-9]{36,251}" + _E, _checksummed),
    Rule("gitlab_token", _B + r"gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_\-]{20,64}" + _E),
    Rule("slack_webhook",
         r"https://hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,12}/"
         r"[A-Z0-9]{6,12}/[A-Za-z0-9]{18,48}" + _E),
    Rule("slack_token",
         _B + r"xox[baprse]-[0-9]{6,14}-(?:[0-9A-Za-z]{4,64}-){0,3}[0-9A-Za-z]{8,64}" + _E),
    Rule("stripe_key", _B + r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,247}" + _E, _random_token),
    Rule("google_api_key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E, _not_example),
    Rule("jwt",
         _B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}" + _E,
         _jwt_header_is_json),
    Rule("anthropic_api_key", _B + r"sk-ant-(?:api|admin)[0-9]{2}-[A-Za-z0-9_\-]{80,120}" + _E),
    Rule("openai_api_key",
         _B + r"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,200}"
         r"|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})" + _E, _random_token),
    Rule("huggingface_token", _B + r"hf_[A-Za-z0-9]{34}" + _E, _random_token),
    Rule("twilio_api_key", _B + r"SK[0-9a-f]{32}" + _E, _random_token),
    Rule("sendgrid_api_key", _B + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _E),
    Rule("mailchimp_api_key", _B + r"[0-9a-f]{32}-us[0-9]{1,2}" + _E, _random_token),
    Rule("npm_token", _B + r"npm_[A-Za-z0-9]{36}" + _E, _checksummed),
    Rule("pypi_token",
         _B + r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{50,}" + _E,
         _pypi_macaroon),
    Rule("azure_storage_key",
         r"(?i:AccountKey)=(?P<v>[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])", _random_token),
    Rule("databricks_token", _B + r"dapi[0-9a-f]{32}(?:-[0-9]{1,2})?" + _E),
    Rule("digitalocean_token", _B + r"do[opr]_v1_[0-9a-f]{64}" + _E),
    Rule("discord_token",
         r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/"
         r"[A-Za-z0-9_\-]{60,68}" + _E),
    Rule("discord_token",
         # The user id's digits in base64 start with M, N or O, then D, T, j or z (spelled
         # out: it makes the candidate alternation 30% faster than [MNO] alone).
         _B + r"[MNO][DTjz][A-Za-z0-9_\-]{22,26}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}" + _E,
         _discord_user_id),
    *(_token_rule(token) for token in TOKEN_FORMATS),
    Rule("putty_private_key",
         r"PuTTY-User-Key-File-[23]: [^\r\n]+(?:\r?\n[^\r\n]*){2,100}?\r?\nPrivate-MAC: [0-9a-f]{40,64}",
         _putty_key, literal="PuTTY-User-Key-File-"),
    Rule("basic_auth_header",
         r"""(?i:authorization)["']?\]?[ \t]*[:=][ \t]*["']?(?i:basic)[ \t]+"""
         r"(?P<v>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])", _basic_credentials,
         keywords=("authorization",)),
    Rule("bearer_token",
         r"""(?i:authorization)["']?\]?[ \t]*[:=][ \t]*["']?(?i:bearer|token)[ \t]+"""
         r"(?P<v>[A-Za-z0-9._~+/\-]{16,}=*)(?![A-Za-z0-9._~+/=\-])", _bearer_token,
         keywords=("authorization",)),
    Rule("command_line_password",  # curl -u user:password
         r"""curl[ \t](?:[^\n]{0,200}?[ \t])?(?:-u|--user)[ \t]*["']?(?P<user>[^:\s"']{1,64}):"""
         r"""(?P<v>[^\s"']{1,128})""", _command_password, keywords=("curl ", "curl\t")),
    Rule("command_line_password",  # mysql -p<password>, with no space
         r"""mysql(?:dump|admin|sh)?\b[^\n]{0,200}?[ \t]-p(?P<v>[^\s"'\-][^\s"']{3,127})""",
         _command_password, keywords=("mysql",)),
    Rule("url_credential_parameter",  # signed URLs: Azure SAS `sig=`, S3/GCS `X-Amz-Signature=`
         r"(?<=[?&])(?i:sig|x-amz-signature|x-goog-signature)=(?P<v>[A-Za-z0-9%._~+/\-]{16,})"
         r"(?![A-Za-z0-9%._~+/=\-])", _bearer_token,
         keywords=("sig=", "x-amz-signature=", "x-goog-signature=")),
    Rule("connection_string_password",
         r"\b" + _DB_SCHEMES + r"://(?P<user>[A-Za-z0-9._%+\-]{0,64}):"
         r"(?P<v>[^/" + _SPACE + r"]{1,256})@[A-Za-z0-9.\-\[\]]", _url_password),
    Rule("generic_secret_assignment",  # inside a JSON string: {\"api_key\": \"…\"}
         _SECRET_NAME + _ASSIGN + r'\\"(?P<v>[^"\\' + _SPACE + r']{8,})\\"', _random_secret,
         _SECRET_NAME_ANCHORS),
    Rule("generic_secret_assignment",
         _SECRET_NAME + _ASSIGN + _quoted_value('"'), _random_secret, _SECRET_NAME_ANCHORS),
    Rule("generic_secret_assignment",
         _SECRET_NAME + _ASSIGN + _quoted_value("'"), _random_secret, _SECRET_NAME_ANCHORS),
    Rule("generic_secret_assignment",  # Go's and JavaScript's backtick strings
         _SECRET_NAME + _ASSIGN + _quoted_value("`"), _random_secret, _SECRET_NAME_ANCHORS),
    Rule("generic_secret_assignment",
         _SECRET_NAME + _ASSIGN + _BARE_VALUE, _random_bare_secret, _SECRET_NAME_ANCHORS),
    Rule("generic_secret_assignment",  # an XML element, the value on its line or the next
         f"(?i:{'|'.join(map(re.escape, _XML_CLOSERS))})"
         r"[ \t\r\n]*(?P<v>[^<\s]{8,512})[ \t\r\n]*</", _xml_secret, keywords=_XML_CLOSERS),
    Rule("generic_secret_assignment",  # <add key="DbPassword" value="…"/>
         r"""(?i:key|name)=(?P<q>["'])(?P<n>[A-Za-z0-9_.\-:]{1,60})(?P=q)[ \t\r\n]+"""
         r"""(?i:value)=(?P<q2>["'])(?P<v>[^"'\s<>]{8,})(?P=q2)""", _attribute_pair_secret,
         keywords=("key=", "name=")),
    Rule("command_line_password",  # --password VALUE, --api-key "VALUE"
         r"--(?:[A-Za-z0-9]+[\-_])*" + _SECRET_NAME + r"""[ \t]+["']?"""
         r"""(?P<v>[^\s"'\-][^\s"']{7,})""", _random_bare_secret),
    Rule("password_in_prose", _TOLD, _told_secret, keywords=_TOLD_NAMES),
    Rule("password_in_prose", _TOLD_TOKEN, _told_secret, keywords=("token is", "token was")),
)  # fmt: skip

SECRET_TYPES: tuple[str, ...] = tuple(dict.fromkeys(rule.type for rule in RULES))
_SCANNER = SpanScanner(tuple(map(_vetted, RULES)))


def find_secrets(texts: pl.Series) -> pl.DataFrame:
    """One row per secret: index (UInt32, position in `texts`), type, start, end (character
    offsets, end exclusive), lead (the first characters of the secret: at most 4 and at most
    a quarter of its length; none of a secret of 4 characters or fewer); sorted by index,
    start.
    Nulls have no findings; one finding per span, the most specific type."""
    return _SCANNER.scan(texts, lead_chars=LEAD_CHARS)


def mask_secrets(text: str, findings: list[dict]) -> str:
    """Replace each finding's span (dicts with type, start, end) by `<SECRET:{type}>`."""
    return replace_spans(text, findings, lambda finding, _: f"<SECRET:{finding['type']}>")


def masked_text(text: str) -> str:
    """`text` with every secret found in it replaced by `<SECRET:{type}>`: for messages,
    alerts and errors that may quote a value or a file name."""
    return mask_secrets(text, find_secrets(pl.Series([text], dtype=pl.String)).to_dicts())


def masked_secrets(values: pl.Series) -> pl.Series:
    """`values` with every secret found in them replaced by `<SECRET:{type}>` (nulls stay):
    for review items, and for what is not record text but is still shown or stored, such as
    file names and config values."""
    findings = find_secrets(values)
    if findings.height == 0:
        return values
    spans: dict[int, list[dict]] = {}
    for finding in findings.iter_rows(named=True):
        spans.setdefault(finding["index"], []).append(finding)
    return pl.Series(
        values.name,
        [mask_secrets(v, spans[i]) if i in spans else v for i, v in enumerate(values)],
        dtype=pl.String,
    )
