"""Secret and credential detector: provider tokens in their documented formats, private keys,
JWTs, passwords in connection URLs (also with an empty user: `redis://:pw@host`), and
high-entropy values assigned to secret-like names.

One polars pass selects the rows that may hold a secret; only those go through Python `re`
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
import math
import re
from collections import Counter
from collections.abc import Callable

import polars as pl

from pipeline.text.secret_tokens import TOKEN_FORMATS, base62_crc32
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
    "getenv", "none", "null", "undefined", "#{", "%{",
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


def _random_after(prefix: int) -> Callable[[re.Match[str]], bool]:
    """A provider token's check: what follows its literal prefix is random, not a stand-in
    (`ghp_xxxx…`, `…EXAMPLE…`)."""

    def random_body(match: re.Match[str]) -> bool:
        body = match.group()[prefix:]
        return (
            "EXAMPLE" not in body.upper()
            and "xxxx" not in body.lower()
            and shannon_entropy(body) >= PREFIXED_TOKEN_MIN_ENTROPY
        )

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


def _random_secret(match: re.Match[str]) -> bool:
    value = _value(match)
    name = match.group()[: match.start("v") - match.start()]
    return (
        not is_placeholder(value)
        and not _WORDS.fullmatch(value)
        and shannon_entropy(value) >= GENERIC_MIN_ENTROPY
        and value.lower() not in name.lower()
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


def _pem_body(match: re.Match[str]) -> bool:
    """Enough base64 between the labels to be a key, not a label quoted in code or docs."""
    body = match.group().split("-----")[2].replace("\\n", "")
    return len(re.findall(r"[A-Za-z0-9+/]", body)) >= 64 and "EXAMPLE" not in body.upper()


# Token boundaries: not glued to a longer run of the same alphabet.
_B = r"(?<![A-Za-z0-9_\-])"
_E = r"(?![A-Za-z0-9_\-])"
# `=`, `:` and the assignments of Makefiles (`:=`, `::=`, `:::=`, `?=`, `+=`), PHP (`.=`,
# `??=`), Perl and Ruby (`=>`), after an optional type (`apiKey: string =`, Go's
# `var apiKey string =`).
_ASSIGN = (
    r"""["']?(?:[ \t]*:?[ \t]*(?:string|String|str)\b)?[ \t]*"""
    r"(?:=>|:::=|::=|:=|\?\?=|\?=|\+=|\.=|=|:)[ \t]*"
)
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
         _B + r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{50,}" + _E),
    Rule("azure_storage_key",
         r"(?i:AccountKey)=(?P<v>[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])", _random_token),
    Rule("databricks_token", _B + r"dapi[0-9a-f]{32}(?:-[0-9]{1,2})?" + _E),
    Rule("digitalocean_token", _B + r"do[opr]_v1_[0-9a-f]{64}" + _E),
    Rule("discord_token",
         r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/"
         r"[A-Za-z0-9_\-]{60,68}" + _E),
    Rule("discord_token",
         _B + r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}" + _E,
         _discord_user_id),
    *(Rule(token.type, _B + token.pattern + _E, _random_after(len(token.prefix)),
           literal=token.literal) for token in TOKEN_FORMATS),
    Rule("connection_string_password",
         r"\b" + _DB_SCHEMES + r"://(?P<user>[A-Za-z0-9._%+\-]{0,64}):"
         r"(?P<v>[^/" + _SPACE + r"]{1,256})@[A-Za-z0-9.\-\[\]]", _url_password),
    Rule("generic_secret_assignment",
         _SECRET_NAME + _ASSIGN + _quoted_value('"'), _random_secret, _SECRET_NAME_ANCHORS),
    Rule("generic_secret_assignment",
         _SECRET_NAME + _ASSIGN + _quoted_value("'"), _random_secret, _SECRET_NAME_ANCHORS),
    Rule("generic_secret_assignment",  # Go's and JavaScript's backtick strings
         _SECRET_NAME + _ASSIGN + _quoted_value("`"), _random_secret, _SECRET_NAME_ANCHORS),
    Rule("generic_secret_assignment",
         _SECRET_NAME + _ASSIGN + _BARE_VALUE, _random_bare_secret, _SECRET_NAME_ANCHORS),
)  # fmt: skip

SECRET_TYPES: tuple[str, ...] = tuple(dict.fromkeys(rule.type for rule in RULES))
_SCANNER = SpanScanner(RULES)


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
