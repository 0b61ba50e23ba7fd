"""The secret detector: every type found at its exact span, look-alikes left alone."""

from __future__ import annotations

import random
import string

import polars as pl
import pytest
from credential_factory import (
    AWS_EXAMPLE_KEY_ID,
    B64,
    HARD_NEGATIVE_BUILDERS,
    HEX,
    SECRET_BUILDERS,
    UPPER_ALNUM,
    format_negatives,
    hard_negative_sample,
    secret_sample,
)

from pipeline.text.secret_tokens import TOKEN_FORMATS
from pipeline.text.secrets import SECRET_TYPES, find_secrets, mask_secrets, shannon_entropy
from pipeline.text.text_scan import Rule, SpanScanner


def _findings(texts: list[str | None]) -> list[dict]:
    return find_secrets(pl.Series(texts, dtype=pl.String)).to_dicts()


def test_every_type_has_a_builder():
    assert set(SECRET_BUILDERS) == set(SECRET_TYPES)
    assert len(SECRET_TYPES) == 31 + len({token.type for token in TOKEN_FORMATS}) >= 200


def test_each_type_is_found_at_its_exact_span_and_masked():
    """Five samples of every type (each a context of the factory's, a value of its own) in
    one scan, every other row clean: each is found once, at its exact span, and masked."""
    prefix = "naïve café — "  # non-ASCII text first: offsets are characters, not bytes
    samples = [
        secret_sample(kind, random.Random(seed)) for kind in SECRET_TYPES for seed in range(1, 6)
    ]
    texts = [text for sample in samples for text in ("nothing here", prefix + sample.text)]
    found: dict[int, list[dict]] = {}
    for finding in _findings(texts):
        found.setdefault(finding["index"], []).append(finding)

    wrong = []
    for number, sample in enumerate(samples):
        index, start, end = 2 * number + 1, len(prefix) + sample.start, len(prefix) + sample.end
        text = texts[index]
        expected = {
            "index": index,
            "type": sample.kind,
            "start": start,
            "end": end,
            "lead": sample.value[: min(4, len(sample.value) // 4)],
        }
        masked = mask_secrets(text, found.get(index, []))
        if (
            found.get(index) != [expected]
            or masked != text[:start] + f"<SECRET:{sample.kind}>" + text[end:]
            or sample.value in masked
        ):
            wrong.append((sample.kind, text, found.get(index)))
    assert not any(index % 2 == 0 for index in found)  # the clean rows
    assert wrong == []


@pytest.mark.parametrize("kind", sorted(HARD_NEGATIVE_BUILDERS))
def test_hard_negatives_are_not_secrets(kind):
    rng = random.Random(7)
    samples = [hard_negative_sample(kind, rng).text for _ in range(30)]
    assert _findings(samples) == []


def test_aws_documented_example_keys_are_not_secrets():
    texts = [
        f"aws_access_key_id = {AWS_EXAMPLE_KEY_ID}",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ]
    assert _findings(texts) == []


def test_nulls_and_clean_rows_have_no_findings_and_the_schema_holds():
    frame = find_secrets(pl.Series([None, "just text", ""], dtype=pl.String))
    assert frame.height == 0
    assert frame.schema == pl.Schema(
        {
            "index": pl.UInt32,
            "type": pl.String,
            "start": pl.Int64,
            "end": pl.Int64,
            "lead": pl.String,
        }
    )


def test_several_secrets_in_one_row_are_sorted_and_all_masked():
    rng = random.Random(11)
    token = secret_sample("github_token", rng).value
    key = secret_sample("aws_access_key_id", rng).value
    text = f"id={key} then {token}"

    findings = _findings([None, text])

    assert [(f["index"], f["type"], f["start"]) for f in findings] == [
        (1, "aws_access_key_id", 3),
        (1, "github_token", 3 + len(key) + 6),
    ]
    assert (
        mask_secrets(text, findings) == "id=<SECRET:aws_access_key_id> then <SECRET:github_token>"
    )


def test_a_provider_token_in_a_secret_assignment_is_reported_once_as_the_provider():
    token = secret_sample("stripe_key", random.Random(5)).value
    text = f'STRIPE_SECRET_KEY="{token}"'
    findings = _findings([text])
    assert [(f["type"], f["start"], f["end"]) for f in findings] == [
        ("stripe_key", 19, 19 + len(token))
    ]


@pytest.mark.parametrize(
    "text",
    [
        "token_type = 'quoted-string'",  # the name does not end with a secret word
        "self.token = next_token",  # code, not a value
        "cache_token = current_token",
        "password = getpass.getpass()",
        "postgres://postgres:postgres@localhost/db",  # the user name as password: a default
        "-----BEGIN RSA " + "PRIVATE KEY-----",  # a label without a key
        "sha256:" + "ab12" * 16,
        "password = '%(password)s'",  # a format string
    ],
)
def test_code_and_labels_that_mention_secrets_are_not_secrets(text):
    assert _findings([text]) == []


def test_a_jwt_whose_header_is_not_json_is_not_reported():
    text = "eyJub3RqcwNvbiBhdCBhbGw.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnopqrstuvwxyz012345"
    assert _findings([text]) == []


def test_shannon_entropy():
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == 2.0


def test_mask_secrets_skips_overlapping_spans_and_keeps_the_rest():
    findings = [
        {"type": "jwt", "start": 2, "end": 6},
        {"type": "github_token", "start": 4, "end": 8},
    ]
    assert mask_secrets("0123456789", findings) == "0123<SECRET:github_token>89"


def test_real_text_has_no_secrets(sms_spam):
    assert find_secrets(sms_spam["text"]).height == 0


@pytest.mark.parametrize(
    ("text", "value", "lead"),
    [
        ("postgres://app:Q7!z@db.internal/main", "Q7!z", ""),  # the whole password otherwise
        ("mysql://root:Zk4!q@db/main", "Zk4!q", "Z"),
        ('DB_PASSWORD="Xk9#mQ2p"', "Xk9#mQ2p", "Xk"),
        ("secret: Rt5%vB8&wQ", "Rt5%vB8&wQ", "Rt"),
        ("redis://default:Pz81vLx0pT4mQa7W@cache/0", "Pz81vLx0pT4mQa7W", "Pz81"),
    ],
)
def test_the_lead_is_at_most_a_quarter_of_the_secret(text, value, lead):
    findings = _findings([text])
    start = text.index(value)
    assert [(f["start"], f["end"], f["lead"]) for f in findings] == [
        (start, start + len(value), lead)
    ]


@pytest.mark.parametrize(
    "text",
    [
        "redis://:Zq81vLx0pT4m@cache.internal:6379/0",
        "rediss://:Zq81vLx0pT4m@cache.internal:6380",
        "amqp://:Kp2xWq9Lm4@mq.internal:5672/vhost",
        "postgres://:Hn7sPq2Wz9@db.internal/main",
        "mysql://:Hn7sPq2Wz9@db.internal/main",
        "mongodb://:Hn7sPq2Wz9@db.internal/main",
    ],
)
def test_a_connection_url_with_an_empty_user_is_found(text):
    password = text.split("//:", 1)[1].split("@", 1)[0]
    start = text.index(password)
    assert [(f["type"], f["start"], f["end"]) for f in _findings([text])] == [
        ("connection_string_password", start, start + len(password))
    ]


@pytest.mark.parametrize(
    "text",
    [
        "postgres://user:${DB_PASSWORD}@host/db",
        "postgres://user@host/db",
        "redis://:${REDIS_PASSWORD}@cache:6379",
        "redis://:password@cache:6379",
        "redis://:changeme@cache:6379",
        "redis://:@cache:6379",
        "redis://cache:6379/0",
    ],
)
def test_connection_urls_without_a_real_password_are_not_secrets(text):
    assert _findings([text]) == []


def test_each_distinct_candidate_text_is_verified_once_and_reported_for_every_row():
    calls = []

    def accept(match):
        calls.append(match.group())
        return True

    scanner = SpanScanner([Rule("code", r"ab[0-9]", accept)])
    texts = pl.Series(["x ab1", "zz", "x ab1", "x ab1", None, "ab2 ab3", "ab2 ab3"])

    found = scanner.scan(texts, lead_chars=4)

    assert sorted(calls) == ["ab1", "ab2", "ab3"]
    assert found.rows() == [
        (0, "code", 2, 5, ""),
        (2, "code", 2, 5, ""),
        (3, "code", 2, 5, ""),
        (5, "code", 0, 3, ""),
        (5, "code", 4, 7, ""),
        (6, "code", 0, 3, ""),
        (6, "code", 4, 7, ""),
    ]


def test_duplicate_rows_get_the_same_findings():
    sample = secret_sample("github_token", random.Random(3))
    findings = _findings([sample.text, "clean", sample.text])
    assert [(f["index"], f["start"], f["end"]) for f in findings] == [
        (0, sample.start, sample.end),
        (2, sample.start, sample.end),
    ]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # Unquoted: to the next whitespace, `,`, `;`, `&name=` or closing bracket.
        ("password=pLIix6ME\\OLeMa61EqJom", "pLIix6ME\\OLeMa61EqJom"),
        ("password=pLIix6ME\\OLeMa61EqJom next", "pLIix6ME\\OLeMa61EqJom"),
        ('password=pLIix6ME"OLeMa61EqJom', 'pLIix6ME"OLeMa61EqJom'),
        ("password=pLIix6ME$OLeMa61EqJom", "pLIix6ME$OLeMa61EqJom"),
        ("secret: Xk9%mQ2p€Lq7zü, next", "Xk9%mQ2p€Lq7zü"),
        ("token=Xk9mQ2pLq7:ä\\x;user=bob", "Xk9mQ2pLq7:ä\\x"),
        ("https://h/cb?access_token=Xk9mQ2p\\Lq7&state=abc", "Xk9mQ2p\\Lq7"),
        ("f(api_key=Xk9mQ2p\\Lq7)", "Xk9mQ2p\\Lq7"),
        ("password=Xk9mQ2pLq7\u00a0next", "Xk9mQ2pLq7"),  # a no-break space ends it too
        ('cmd = "mysql --password=Xk9mQ2p\\Lq7"', "Xk9mQ2p\\Lq7"),  # the string's quote
        # Quoted: to the closing quote, backslash escapes honoured.
        ('password = "pLIix6ME\\"OLeMa61EqJom"', 'pLIix6ME\\"OLeMa61EqJom'),
        ("secret: 'Xk9#mQ2p\\'Lq7\\\\'", "Xk9#mQ2p\\'Lq7\\\\"),
        ('{"api_key": "Xk9%mQ2p€Lq7z\\\\ü"}', "Xk9%mQ2p€Lq7z\\\\ü"),
        ("DB_PASSWORD='Zq8\"w%Lm2€x'", 'Zq8"w%Lm2€x'),
        # URL passwords: to the last `@` before the host.
        ('postgres://app:Xk9\\mQ2p"Lq@db.internal/main', 'Xk9\\mQ2p"Lq'),
        ("mysql://root:p@ss#w0rd€@db.internal/main", "p@ss#w0rd€"),
        ("redis://:Zq8^w%Lm2@cache:6379/0", "Zq8^w%Lm2"),
    ],
)
def test_the_span_covers_the_whole_value_and_masking_leaves_none_of_it(text, value):
    findings = _findings([text])
    start = text.index(value)
    assert [(f["start"], f["end"]) for f in findings] == [(start, start + len(value))]
    masked = mask_secrets(text, findings)
    assert masked == text[:start] + f"<SECRET:{findings[0]['type']}>" + text[start + len(value) :]


@pytest.mark.parametrize(
    "template",
    [  # Makefile, PHP, Go and TypeScript assignments
        "API_TOKEN ::= {}", "API_TOKEN :::= {}", "DB_PASSWORD ?= {}", "SECRET += {}",
        "$password .= '{}';", "$api_key ??= '{}';", 'var apiKey string = "{}"',
        "token := `{}`", 'const apiKey: string = "{}";',
        # TOML, INI, YAML, Ruby, Kotlin, C#
        'api_key = "{}"', "password={}", "  db_password: {}", "config[:api_key] = '{}'",
        'val apiToken = "{}"', 'private const string ClientSecret = "{}";',
        # environment setters and indexes, JSON escaped inside a string
        'System.setProperty("DB_PASSWORD", "{}");', 'os.environ["API_KEY"] = "{}"',
        "ENV['SECRET_TOKEN'] = '{}'", 'os.environ.setdefault("AUTH_TOKEN", "{}")',
        '"{{\\"api_key\\": \\"{}\\"}}"',
        # XML elements (also with the value on its own line) and attribute pairs
        "<password>{}</password>", "<dbPassword>\n    {}\n</dbPassword>",
        '<add key="DbPassword" value="{}" />', "<property name='api.token' value='{}'/>",
    ],
)  # fmt: skip
def test_assignments_of_every_syntax_are_found_at_the_value(template):
    rng = random.Random(template)
    value = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(15)) + "7"
    text = template.format(value)
    start = text.index(value)
    findings = _findings([text])
    assert [(f["type"], f["start"], f["end"]) for f in findings] == [
        ("generic_secret_assignment", start, start + len(value))
    ]


@pytest.mark.parametrize(
    "text",
    [
        "password=hunter2",  # 7 characters: below the minimum
        "password=hunter22",  # 8 characters, 7 distinct: below 3 bits per character
        'secret: "Don\'t tell anyone, 42!"',  # a quoted value with spaces is prose
        "token = get_token(user_id=42)",  # unquoted code: a call
        "api_key = settings.API_KEY_V2",  # a dotted name
        "token: http://foo.bar/baz1",  # a URL
        "secret = tokens[idx_2]",  # an index
        "token={user_token_v2}",  # a template field
        "password=b'password1'",  # a prefixed string literal
        "password=\"#{ENV.fetch('DB_PW')}\"",  # interpolation
    ],
)
def test_short_values_code_and_prose_after_a_secret_name_are_not_secrets(text):
    assert _findings([text]) == []


@pytest.mark.parametrize("kind", ["generic_secret_assignment", "connection_string_password"])
def test_assigned_values_and_url_passwords_of_any_alphabet_are_found_whole(kind):
    rng = random.Random(17)
    samples = [secret_sample(kind, rng) for _ in range(60)]
    found = {(f["index"], f["start"], f["end"]) for f in _findings([s.text for s in samples])}
    assert found == {(i, s.start, s.end) for i, s in enumerate(samples)}
    assert any("\\" in s.value for s in samples) and any('"' in s.value for s in samples)


# An AWS secret access key and an access key id, built at run time (never a committed secret).
_AWS_RNG = random.Random(23)
_AWS_SECRET = "".join(_AWS_RNG.choice(B64) for _ in range(40))
_AWS_KEY_ID = "AKIA" + "".join(_AWS_RNG.choice(UPPER_ALNUM) for _ in range(16))
_AWS_SESSION_KEY_ID = "ASIA" + "".join(_AWS_RNG.choice(UPPER_ALNUM) for _ in range(16))


@pytest.mark.parametrize(
    ("template", "has_key_id"),
    [
        # Near an access key id (AKIA/ASIA), on the same line.
        ("deploy script uses aws key {kid} with secret {key} please rotate", True),
        ("{kid},{key}", True),  # the credentials CSV
        ("alice,,{kid},{key},https://123456789012.signin.aws.amazon.com/console", True),
        ("id {kid} / {key}", True),
        ("{kid} (rotated 2024-05-01 by the on-call engineer, ticket OPS-1234): {key}", True),
        ("session {sid} {key} expires in 1h", True),
        # After words that say it is a secret key: `:`, `=` or whitespace, any case.
        ("aws secret key: {key}", False),
        ("AWS Secret Key = {key}", False),
        ("secret_key = {key}", False),
        ("secret_key = '{key}'", False),
        ('SECRET_KEY: "{key}"', False),
        ("aws_secret={key}", False),
        ("export AWS_SECRET={key}", False),
        ("aws configure set --aws-secret-key {key} --profile prod", False),
        ("the secret access key {key}.", False),
        ("Secret-Key:\t{key}", False),
        ("secretkey => {key}", False),
        # Near an id and after the words at once: one finding.
        ("aws_access_key_id={kid} secret_key = {key}", True),
        # The forms found before.
        ("aws_secret_access_key = {key}", False),
        ('"SecretAccessKey": "{key}"', False),
    ],
)
def test_an_aws_secret_key_is_found_by_its_context_at_the_exact_span(template, has_key_id):
    text = template.format(key=_AWS_SECRET, kid=_AWS_KEY_ID, sid=_AWS_SESSION_KEY_ID)
    start = text.index(_AWS_SECRET)
    expected = [("aws_secret_access_key", start, start + 40)]
    if "{kid}" in template:
        kid_at = text.index(_AWS_KEY_ID)
        expected.insert(0, ("aws_access_key_id", kid_at, kid_at + 20))
    elif "{sid}" in template:
        sid_at = text.index(_AWS_SESSION_KEY_ID)
        expected.insert(0, ("aws_access_key_id", sid_at, sid_at + 20))

    findings = _findings([text])

    assert [(f["type"], f["start"], f["end"]) for f in findings] == expected
    assert has_key_id == (len(findings) == 2)
    assert _AWS_SECRET not in mask_secrets(text, findings)


def test_an_aws_secret_key_more_than_120_characters_after_the_key_id_is_not_found():
    text = f"{_AWS_KEY_ID} {'word ' * 30}{_AWS_SECRET}"
    assert [f["type"] for f in _findings([text])] == ["aws_access_key_id"]


def test_a_git_sha_between_the_key_id_and_the_secret_does_not_hide_the_secret():
    sha = "".join(random.Random(4).choice(HEX) for _ in range(40))
    text = f"{_AWS_KEY_ID} added in {sha}, secret {_AWS_SECRET}"
    start = text.index(_AWS_SECRET)
    assert [(f["type"], f["start"]) for f in _findings([text])] == [
        ("aws_access_key_id", 0),
        ("aws_secret_access_key", start),
    ]


_SHA = "".join(random.Random(5).choice(HEX) for _ in range(40))
_LONGER = "".join(random.Random(6).choice(B64) for _ in range(56))


@pytest.mark.parametrize(
    "text",
    [
        # 40 hex digits: git SHAs and sha1 digests, also next to `secret` or a key id.
        f"secret key: {_SHA}",
        f"secret_key = {_SHA}",
        f"aws secret key {_SHA.upper()}",
        f"fixed the leaked secret in commit {_SHA}",
        f"sha1(secret access key) {_SHA}",
        f"{AWS_EXAMPLE_KEY_ID} revoked in {_SHA}",
        # The documented example key, in the new contexts too.
        "aws secret key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        f"{AWS_EXAMPLE_KEY_ID},wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "secret_key = je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
        # Part of a longer run of base64, URL-safe base64 or a JWT.
        f"secret_key = {_LONGER}",
        f"aws secret key: {_LONGER[:40]}==",
        f"aws secret key: {_LONGER[:40]}_{_LONGER[40:]}",
        f"{AWS_EXAMPLE_KEY_ID} blob {_LONGER[:10]}-{_LONGER[10:50]}",
        f"{AWS_EXAMPLE_KEY_ID} jwt eyJhbGciOiJIUzI1NiJ9.{_LONGER[:40]}.{_LONGER[40:]}",
        # Low entropy, words, paths, placeholders.
        "aws secret key: " + "AbCdEfGh12" * 4,
        "secret_key = " + "A1" * 20,
        f"{AWS_EXAMPLE_KEY_ID} is used by DeployScriptUsesTheProductionCredentials",
        "secret_key = config/secrets/production/aws/credential",
        "secret_key = YourAwsSecretAccessKeyGoesHere1234567890",
    ],
)
def test_aws_secret_look_alikes_are_not_secrets(text):
    assert _findings([text]) == []


def test_aws_secret_keys_in_every_context_of_the_factory_are_found_whole():
    rng = random.Random(29)
    samples = [secret_sample("aws_secret_access_key", rng) for _ in range(200)]
    found = {
        (f["index"], f["type"], f["start"], f["end"]) for f in _findings([s.text for s in samples])
    }
    assert found == {(i, "aws_secret_access_key", s.start, s.end) for i, s in enumerate(samples)}


def test_placeholders_and_tokens_whose_checksum_or_structure_fails_are_not_secrets():
    rng = random.Random(25)
    real = secret_sample("github_token", rng).value  # its checksum holds
    wrong = real[:-1] + ("A" if real[-1] != "A" else "B")
    body = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(30))
    texts = [
        f"git clone https://{real}@github.com/o/r",
        f"git clone https://{wrong}@github.com/o/r",  # one character off: made up, a typo
        "token: ghp_" + "x" * 36,
        "GITHUB_TOKEN=ghp_" + "x" * 36,
        "aws_access_key_id = AKIA" + "X" * 16,
        "npm_" + body + "000000",
        "SHOPIFY=shpat_" + "0" * 32,
        "slack xapp-1-AXXXXXXXXX-0000000000000-" + "x" * 64,
        "twine upload with pypi-AgEIcHlwaS5vcmc" + body * 2,  # the prefix, then no macaroon
    ]
    found = find_secrets(pl.Series(texts))
    assert found["index"].to_list() == [0]
    assert found["type"].to_list() == ["github_token"]


@pytest.mark.parametrize(
    ("kind", "template"),
    [
        ("command_line_password", "mysql -u root -p{} shop"),
        ("command_line_password", "mysqldump --single-transaction -h db -uadmin -p{} main"),
        ("command_line_password", "curl -u deploy:{} https://ci.example.org/api"),
        ("command_line_password", "curl -s -X POST --user 'svc:{}' https://h/x"),
        ("command_line_password", "tool --db-password {} --host db"),
        ("command_line_password", 'deploy --api-key "{}"'),
        ("bearer_token", "Authorization: Bearer {}"),
        ("bearer_token", "curl -H 'authorization: token {}' https://api.github.example"),
        ("url_credential_parameter", "https://a.blob.core.windows.net/c/b?sv=2022&sig={}"),
        ("url_credential_parameter", "https://b.s3.amazonaws.com/k?X-Amz-Signature={}&x=1"),
        ("password_in_prose", "Hi, my password is {}. Can you reset it?"),
        ("password_in_prose", "the password for the admin account was {}, please rotate"),
        ("password_in_prose", "the API key is: {}"),
        ("password_in_prose", "the token was {}"),
        ("password_in_prose", "Mein Passwort ist {} und geht nicht."),
        ("password_in_prose", "das Kennwort lautet: {}"),
        ("password_in_prose", "Hola, mi contraseña es {} pero no puedo entrar."),
        ("password_in_prose", "la clave del servidor es «{}»"),
        ("password_in_prose", "Bonjour, mon mot de passe est {}, merci."),
        ("password_in_prose", "le jeton est : {}"),
    ],
)
def test_command_lines_headers_signed_urls_and_prose_are_found_at_the_value(kind, template):
    rng = random.Random(template)
    symbol = "#" if kind in ("command_line_password", "password_in_prose") else "-"
    value = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(18))
    value += "7" + symbol
    text = template.format(value)
    start = text.index(value)
    assert [(f["type"], f["start"], f["end"]) for f in _findings([text])] == [
        (kind, start, start + len(value))
    ]


def test_basic_auth_is_found_when_its_base64_holds_a_password():
    import base64

    encoded = base64.b64encode(b"deploy:Xk9mQ2pLq7vR").decode()
    empty = base64.b64encode(b"deploy:").decode()
    placeholder = base64.b64encode(b"user:<password>").decode()
    texts = [
        f"Authorization: Basic {encoded}",
        f"Authorization: Basic {empty}",
        f"Authorization: Basic {placeholder}",
        "Authorization: Basic notbase64!!",
    ]
    found = _findings(texts)
    start = texts[0].index(encoded)
    assert [(f["index"], f["type"], f["start"], f["end"]) for f in found] == [
        (0, "basic_auth_header", start, start + len(encoded))
    ]


@pytest.mark.parametrize(
    "text",
    [
        '("number2symbol", "dfas", "keywords", "tokens", "symbol2label")',  # strings, not a call
        'monkeypatch.delenv("THRESHER_REVIEW_TOKEN", raising=False)',  # a keyword argument
        "secret key: " + "3f786850e387550fdab836ed7e6dc881de23001b",  # a sha1 in a changelog
        "<monkey>Xk9mQ2pLq7vR</monkey>",  # an element whose name only ends in `key`
        "<password>${DB_PASSWORD}</password>",
        "the token is expired.",  # words
        "your password for wap.example.com is 391784",  # digits alone: a one-time code
        "mysql -u root -p shop",  # -p then a space: the client prompts
        "curl -u $USER:$TOKEN https://h/x",
        "curl -u admin:admin https://h/x",  # the user name as password: a default
        "Authorization: Bearer <your-token-here>",
        "Authorization: Bearer ${GITHUB_TOKEN}",
        "https://h/x?sig=" + "x" * 24,
        "tool --password PASSWORD",  # a help text's metavariable
        'FAKE_API_KEY = "Xk9mQ2pLq7vR5tY8"',  # test fixtures named as such
        'testPassword = "Xk9mQ2pLq7vR5tY8"',
        "mock_token: Xk9mQ2pLq7vR5tY8",
        '<add key="SamplePassword" value="Xk9mQ2pLq7vR5tY8" />',
        "LATEST_TOKEN_FORMAT = 1",
    ],
)
def test_look_alikes_of_the_new_syntaxes_are_not_secrets(text):
    assert _findings([text]) == []


def test_a_fixture_word_inside_a_longer_word_does_not_hide_a_secret():
    text = 'LATEST_TOKEN = "Xk9mQ2pLq7vR5tY8"'  # `latest`, not `test`
    assert [f["type"] for f in _findings([text])] == ["generic_secret_assignment"]


def test_published_example_credentials_are_not_secrets_and_the_list_names_its_sources():
    from pipeline.text.secrets import PUBLISHED_EXAMPLES

    # Split so that scanners of this repository do not flag the examples themselves.
    examples = [
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6Ikpv"
        "aG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ." + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc",
        "xoxb-" + "17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy",
        "AIza" + "SyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
        + "K1SZFPTOtr/KBHBeksoGMGw==",
    ]
    texts = [f"token: {examples[0]}", f"stripe.api_key = '{examples[1]}'", f"SLACK={examples[2]}",
             f"maps?key={examples[3]}&q=1", f"AccountName=devstoreaccount1;AccountKey={examples[4]}"]  # fmt: skip
    assert _findings(texts) == []
    # The same formats with one character changed are found: the list is exact values.
    changed = [t.replace(e, e[:-3] + ("Q" if e[-3] != "Q" else "R") + e[-2:])
               for t, e in zip(texts, examples, strict=True)]  # fmt: skip
    assert sorted({f["index"] for f in _findings(changed)}) == [0, 1, 2, 3, 4]
    assert all(source.startswith("https://") for source in PUBLISHED_EXAMPLES.values())


def test_each_format_refuses_its_own_placeholders_and_malformed_values():
    negatives = [
        (token.type, text)
        for token in TOKEN_FORMATS
        for text in format_negatives(token, random.Random(token.type))
    ]
    found = _findings([text for _, text in negatives])
    assert [
        (negatives[f["index"]][1], f["type"])
        for f in found
        if f["type"] == negatives[f["index"]][0]
    ] == []
    assert len(negatives) >= 2 * len(TOKEN_FORMATS)


def test_every_format_names_its_documented_source():
    assert all(token.source.startswith("https://") for token in TOKEN_FORMATS)
    assert all(k == k.lower() for token in TOKEN_FORMATS for k in token.keywords)


def test_the_repository_holds_no_live_looking_credential():
    """Every tracked text file scanned: only the span tests' made-up passwords (no provider
    token) and one quoted real-text finding in the bench notes are allowed."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    files = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    texts, names = [], []
    for name in files:
        try:
            texts.append((root / name).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        names.append(name)
    found = {(names[f["index"]], f["type"]) for f in _findings(texts)}
    allowed = {
        ("tests/pipeline/text/test_secrets.py", "generic_secret_assignment"),
        ("tests/pipeline/text/test_secrets.py", "connection_string_password"),
        ("bench/README.md", "generic_secret_assignment"),
    }
    assert found <= allowed, found - allowed


@pytest.mark.parametrize(
    "text", ["DB_PASSWORD=Xk9v2=Lq8Zt3Wp", "API_TOKEN=Xk9v2Lq8Zt3Wp=abQ7", "secret=k8Jq2=Zp0Lm9Xw"]
)
def test_an_unquoted_value_holding_name_equals_is_still_a_secret(text):
    value = text.split("=", 1)[1]
    assert [(f["start"], f["end"]) for f in _findings([text])] == [
        (len(text) - len(value), len(text))
    ]


def test_a_keyed_base64_value_longer_than_its_format_is_masked_whole():
    rng = random.Random(1)
    token = "".join(rng.choice(B64) for _ in range(1600))  # past aws_session_token's 1,200
    text = "AWS_SESSION_TOKEN=" + token
    [finding] = _findings([text])
    assert (finding["start"], finding["end"]) == (18, len(text))
    assert token not in mask_secrets(text, [finding])
