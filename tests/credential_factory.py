"""Fake credentials in each provider's documented format, built at run time from a seeded
random generator (never commit a real-looking secret), and hard negatives that look like
secrets but are not. Shared by the tests and bench/bench_secrets.py."""

from __future__ import annotations

import base64
import json
import random
import re
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.text.secret_tokens import TOKEN_FORMATS, TokenFormat, base62_crc32

ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
MIXED = ALNUM + '\\"%$€ü'  # characters a password may hold that token alphabets do not


@dataclass(frozen=True)
class Sample:
    """`text` holds one secret (or hard negative) at [start, end)."""

    kind: str
    text: str
    start: int
    end: int

    @property
    def value(self) -> str:
        return self.text[self.start : self.end]


def _chars(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _sample(kind: str, before: str, value: str, after: str = "") -> Sample:
    return Sample(kind, before + value + after, len(before), len(before) + len(value))


def _private_key(rng: random.Random) -> tuple[str, str, str]:
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"])
    body = "\n".join(_chars(rng, 64, B64) for _ in range(rng.randint(4, 12)))
    block = f"-----BEGIN {label}-----\n{body}\n{_chars(rng, 20, B64)}==\n-----END {label}-----"
    return "key.pem:\n", block, "\n"


def _checksummed(prefix: str, rng: random.Random) -> str:
    """A GitHub or npm token: 30 random characters and their base62 CRC32."""
    body = _chars(rng, 30)
    return prefix + body + base62_crc32(body)


def _pypi_token(rng: random.Random) -> str:
    """A version-2 macaroon as PyPI issues them: location, identifier, a caveat, signature."""
    identifier = rng.randbytes(rng.randint(16, 40))
    caveat = b'{"version": 1, "permissions": "user"}'
    data = (
        b"\x02\x01\x08pypi.org\x02" + bytes([len(identifier)]) + identifier + b"\x00"
        + b"\x02" + bytes([len(caveat)]) + caveat + b"\x00"
        + b"\x00\x06\x20" + rng.randbytes(32)
    )  # fmt: skip
    return "pypi-" + _b64url(data)


def _jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"sub": str(rng.randrange(10**9)), "name": _chars(rng, 8), "iat": 1516239022}
    return f"{header}.{_b64url(json.dumps(claims).encode())}.{_chars(rng, 43, URLSAFE)}"


def _discord_bot(rng: random.Random) -> str:
    user_id = str(rng.randrange(10**17, 10**18)).encode()
    return f"{_b64url(user_id)}.{_chars(rng, 6, URLSAFE)}.{_chars(rng, 27, URLSAFE)}"


# The documented example access key id: found by no rule, so that a sample holding it has one
# finding, the secret next to it (the tests also pair the secret with a real-looking id).
AWS_EXAMPLE_KEY_ID = (
    "AKIA" + "IOSFODNN7EXAMPLE"
)  # AWS's documented example, split so scanners skip this file


def _aws_secret(rng: random.Random) -> tuple[str, str, str]:
    """A secret access key by its name, after words that say it is one, or near an access key
    id (prose, the credentials CSV)."""
    key = _chars(rng, 40, B64)
    kid = AWS_EXAMPLE_KEY_ID
    return rng.choice(
        [
            ("aws_secret_access_key = ", key, "\n"),
            ('{"AccessKeyId": "' + kid + '", "SecretAccessKey": "', key, '"}'),
            (f"deploy script uses aws key {kid} with secret ", key, " please rotate"),
            ("aws secret key: ", key, ""),
            (f"aws_access_key_id = {kid}\nsecret_key = ", key, "\n"),
            ("AWS_SECRET=", key, ""),
            ("aws configure set --aws-secret-key ", key, " --profile prod"),
            ("Secret Access Key ", key, "."),
            (f"Access key ID,Secret access key\n{kid},", key, "\n"),
            (f"alice,,{kid},", key, ",https://123456789012.signin.aws.amazon.com/console"),
        ]
    )


def _putty_key(rng: random.Random) -> tuple[str, str, str]:
    public = "\n".join(_chars(rng, 64, B64) for _ in range(6))
    private = "\n".join(_chars(rng, 64, B64) for _ in range(14))
    key = (
        "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: deploy@ci\n"
        f"Public-Lines: 6\n{public}\nPrivate-Lines: 14\n{private}\n"
        f"Private-MAC: {_chars(rng, 64, HEX)}"
    )
    return "id_rsa.ppk:\n", key, "\n"


def _told_password(rng: random.Random) -> str:
    """What people pick: a word, digits and a symbol."""
    word = rng.choice(["Sommer", "Winter", "Dragon", "Monkey", "Soleil", "Primavera"])
    return f"{word}{rng.randint(1000, 9999)}{rng.choice('!#$%&*?')}{_chars(rng, 3)}"


# kind -> builder of (text before, secret, text after)
SECRET_BUILDERS: dict[str, Callable[[random.Random], tuple[str, str, str]]] = {
    "private_key": _private_key,
    "aws_access_key_id": lambda r: (
        "aws_access_key_id = ",
        "AKIA" + _chars(r, 16, UPPER_ALNUM),
        "",
    ),
    "aws_secret_access_key": _aws_secret,
    "github_token": lambda r: (
        "git clone https://",
        _checksummed(r.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]), r),
        "@github.com/o/r",
    ),
    "github_fine_grained_token": lambda r: (
        "GITHUB_TOKEN=",
        f"github_pat_{_chars(r, 22)}_{_chars(r, 59)}",
        "\n",
    ),
    "gitlab_token": lambda r: ("PRIVATE-TOKEN: ", "glpat-" + _chars(r, 20, URLSAFE), "\n"),
    "slack_token": lambda r: (
        "slack bot ",
        f"xoxb-{r.randrange(10**10, 10**11)}-{r.randrange(10**12, 10**13)}-{_chars(r, 24)}",
        " rotated",
    ),
    "slack_webhook": lambda r: (
        "curl -X POST ",
        f"https://hooks.slack.com/services/T{_chars(r, 8, UPPER_ALNUM)}/"
        f"B{_chars(r, 8, UPPER_ALNUM)}/{_chars(r, 24)}",
        " -d @msg.json",
    ),
    "stripe_key": lambda r: ("stripe.api_key = '", "sk_live_" + _chars(r, 24), "'"),
    "google_api_key": lambda r: ("maps?key=", "AIza" + _chars(r, 35, URLSAFE), "&q=x"),
    "jwt": lambda r: ("Authorization: Bearer ", _jwt(r), "\n"),
    "openai_api_key": lambda r: ("OPENAI_API_KEY=", "sk-proj-" + _chars(r, 120, URLSAFE), "\n"),
    "anthropic_api_key": lambda r: (
        "client = Anthropic(api_key='",
        f"sk-ant-api03-{_chars(r, 93, URLSAFE)}AA",
        "')",
    ),
    "huggingface_token": lambda r: (
        'login(token="',
        "hf_" + _chars(r, 34, string.ascii_letters),
        '")',
    ),
    "twilio_api_key": lambda r: ("twilio key ", "SK" + _chars(r, 32, HEX), " (main)"),
    "sendgrid_api_key": lambda r: (
        "SENDGRID_API_KEY=",
        f"SG.{_chars(r, 22, URLSAFE)}.{_chars(r, 43, URLSAFE)}",
        "\n",
    ),
    "mailchimp_api_key": lambda r: (
        "mailchimp: ",
        f"{_chars(r, 32, HEX)}-us{r.randint(1, 20)}",
        "",
    ),
    "npm_token": lambda r: ("//registry.npmjs.org/:_authToken=", _checksummed("npm_", r), "\n"),
    "pypi_token": lambda r: ("password = ", _pypi_token(r), "\n"),
    "azure_storage_key": lambda r: (
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=",
        _chars(r, 86, B64) + "==",
        ";EndpointSuffix=core.windows.net",
    ),
    "databricks_token": lambda r: ("DATABRICKS_TOKEN: ", "dapi" + _chars(r, 32, HEX), "\n"),
    "digitalocean_token": lambda r: ("doctl auth init -t ", "dop_v1_" + _chars(r, 64, HEX), ""),
    "discord_token": lambda r: r.choice(
        [
            ('bot.run("', _discord_bot(r), '")'),
            (
                "webhook ",
                f"https://discord.com/api/webhooks/{r.randrange(10**17, 10**18)}/"
                f"{_chars(r, 68, URLSAFE)}",
                " .",
            ),
        ]
    ),
    "connection_string_password": lambda r: (
        r.choice(["postgres://app:", "mysql://root:", "mongodb+srv://svc:", "redis://default:"]),
        _chars(r, 1, string.ascii_letters) + _chars(r, 15, r.choice([ALNUM, MIXED + "@#"])),
        "@db.internal:5432/main",
    ),
    "putty_private_key": _putty_key,
    "basic_auth_header": lambda r: (
        r.choice(
            ["Authorization: Basic ", "curl -H 'Authorization: Basic ", '"authorization": "Basic ']
        ),
        base64.b64encode(f"{_chars(r, 6)}:{_chars(r, 14, ALNUM + '!#%')}".encode()).decode(),
        "\n",
    ),
    "bearer_token": lambda r: (
        r.choice(
            [
                "Authorization: Bearer ",
                "-H 'authorization: token ",
                "headers['Authorization'] = 'Bearer ",
            ]
        ),
        _chars(r, 8) + str(r.randint(0, 9)) + _chars(r, 31, ALNUM + "-._~"),
        "'",
    ),
    "command_line_password": lambda r: r.choice(
        [
            ("curl -u deploy:", _chars(r, 12) + str(r.randint(10, 99)), " https://ci.internal/api"),
            (
                "mysql -h db.internal -u root -p",
                _chars(r, 11) + "#" + str(r.randint(0, 9)),
                " shop",
            ),
            ("psql-wrapper --db-password ", _chars(r, 14) + str(r.randint(0, 9)), " --host db"),
            ('deploy --api-key "', _chars(r, 24) + str(r.randint(0, 9)), '" --verbose'),
        ]
    ),
    "url_credential_parameter": lambda r: (
        "https://acct.blob.core.windows.net/c/f.csv?sv=2022-11-02&se=2030-01-01&sr=b&sp=r&sig=",
        _chars(r, 40, ALNUM) + "%3D",
        " expires next year",
    ),
    "password_in_prose": lambda r: r.choice(
        [
            ("Hi, my password is ", _told_password(r), ". Can you reset it?"),
            ("the password for the admin account was ", _told_password(r), ", please rotate"),
            ("Mein Passwort ist ", _told_password(r), " und funktioniert nicht."),
            ("das Kennwort lautet: ", _told_password(r), ""),
            ("Hola, mi contraseña es ", _told_password(r), " pero no puedo entrar."),
            ("Bonjour, mon mot de passe est ", _told_password(r), ", merci."),
            ("le jeton est « ", _told_password(r), " »"),
        ]
    ),
    "generic_secret_assignment": lambda r: r.choice(
        [
            ('DB_PASSWORD="', _chars(r, 20, ALNUM + "!#%&*"), '"'),
            ("client_secret: ", _chars(r, 18) + str(r.randint(0, 9)), "\n"),
            ('{"api_key": "', _chars(r, 32, HEX), '"}'),
            # Values with backslashes, quotes, `%`, `$` and non-ASCII letters: found whole.
            ("password=", _chars(r, 1, string.ascii_letters) + _chars(r, 18, MIXED) + "7", "\n"),
            ('"secret": "', f'{_chars(r, 8)}\\"{_chars(r, 8, ALNUM + "%ü")}', '"'),
        ]
    ),
}


def _token_in_context(token: TokenFormat) -> Callable[[random.Random], tuple[str, str, str]]:
    """A provider token (pipeline/text/secret_tokens.py) in one of the places people put one:
    an environment file, JSON, YAML, a shell command, a header, a sentence."""
    name = token.type.upper()

    def build(rng: random.Random) -> tuple[str, str, str]:
        before, after = rng.choice(
            [
                (f"{name}=", "\n"),
                (f'{{"{token.type}": "', '"}'),
                (f"{token.type}: ", "\n"),
                (f"export {name}='", "'"),
                ("curl -H 'Authorization: Bearer ", "' https://api.example.org/v1"),
                ("the new key is ", ", rotate the old one"),
            ]
        )
        return before, token.sample(rng), after

    return build


def _keyed_in_context(token: TokenFormat) -> Callable[[random.Random], tuple[str, str, str]]:
    """A provider value without a prefix of its own after a name holding the provider's
    keyword, in the syntaxes people write: dotenv, JSON (also escaped in a string), YAML, a
    multi-line XML element, a command-line flag, Java's and Python's environment setters."""
    snake = re.sub(r"[^a-z0-9]+", "_", token.keywords[0]).strip("_")
    upper, camel = snake.upper(), re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), snake)
    flag = snake.replace("_", "-")

    def build(rng: random.Random) -> tuple[str, str, str]:
        before, after = rng.choice(
            [
                (f"{upper}_API_KEY=", "\n"),
                (f'{{"{camel}Token": "', '"}'),
                (f"{snake}_secret: ", "\n"),
                (f"<{camel}ApiKey>\n    ", f"\n</{camel}ApiKey>"),
                (f"run --{flag}-token ", " --verbose"),
                (f'"{{\\"{snake}_api_key\\": \\"', '\\"}"'),
                (f'System.setProperty("{upper}_TOKEN", "', '");'),
                (f'os.environ["{upper}_AUTH_TOKEN"] = "', '"'),
            ]
        )
        return before, token.sample(rng), after

    return build


SECRET_BUILDERS |= {
    token.type: (_keyed_in_context if token.keywords else _token_in_context)(token)
    for token in TOKEN_FORMATS
}


def format_negatives(token: TokenFormat, rng: random.Random) -> list[str]:
    """Each format's own negatives: every run replaced by `x` (a stand-in), the first run one
    character short (a malformed or cut value), and for a keyed format a value after the
    provider's name that is not a credential's (`datadog trace_id: …`)."""
    placeholder = "".join(part if isinstance(part, str) else "x" * part[1] for part in token.parts)
    first_run = next(i for i, part in enumerate(token.parts) if not isinstance(part, str))
    short = "".join(
        part if isinstance(part, str) else token.sample_run(part, rng, shorter=i == first_run)
        for i, part in enumerate(token.parts)
    )
    if not token.keywords:
        return [f"value {placeholder} end", f"value {short} end"]
    name = token.keywords[0].upper().replace("-", "_") + "_API_KEY="
    return [name + placeholder, name + short, f"{token.keywords[0]} trace_id: {token.sample(rng)}"]


def secret_sample(kind: str, rng: random.Random) -> Sample:
    return _sample(kind, *SECRET_BUILDERS[kind](rng))


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _aws_secret_look_alike(rng: random.Random) -> tuple[str, str, str]:
    """40 characters where an AWS secret key could stand that are not one: hex digests, the
    documented example key, part of a longer base64 run, a value of low entropy."""
    sha = _chars(rng, 40, HEX)
    kid = AWS_EXAMPLE_KEY_ID
    return rng.choice(
        [
            ("rotated the leaked secret in commit ", sha, ""),
            ("secret key: ", sha, ""),
            (f"{kid} revoked in ", sha, ", see the secret rotation runbook"),
            ("sha1(secret_key) = ", sha.upper(), ""),
            ("aws secret key: ", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""),
            (f"{kid},", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""),
            ("secret_key = ", _chars(rng, 40, B64) + _chars(rng, 4, B64) + "==", ""),
            (f"{kid} ", _chars(rng, 12, B64) + "_" + _chars(rng, 40, ALNUM), ""),
            (f"{kid} token eyJ{_chars(rng, 20, URLSAFE)}.", _chars(rng, 40, ALNUM), ""),
            ("aws secret key: ", "AbCdEfGh12" * 4, ""),  # 3.3 bits per character
            (f"{kid} is used by ", "DeployScriptUsesTheProductionCredentials", ""),
            ("secret_key = ", "config/secrets/production/aws/credential", ""),
        ]
    )


# class -> builder of (text, value span start, end); the span is the look-alike value.
HARD_NEGATIVE_BUILDERS: dict[str, Callable[[random.Random], tuple[str, str, str]]] = {
    "git_sha": lambda r: (r.choice(["commit ", "rev: ", "Merge: "]), _chars(r, 40, HEX), ""),
    "sha256_digest": lambda r: ("", _chars(r, 64, HEX), "  dist/pkg-1.0.tar.gz"),
    "sha512_digest": lambda r: ("sha512sum: ", _chars(r, 128, HEX), ""),
    "lockfile_integrity": lambda r: (
        '"integrity": "',
        "sha512-" + base64.b64encode(r.randbytes(64)).decode(),
        '",',
    ),
    "requirements_hash": lambda r: ("requests==2.31.0 --hash=", "sha256:" + _chars(r, 64, HEX), ""),
    "uuid": lambda r: (r.choice(["request_id=", '"id": "', "uuid "]), _uuid(r), ""),
    "base64_image": lambda r: (
        '<img src="',
        "data:image/png;base64," + base64.b64encode(r.randbytes(600)).decode(),
        '">',
    ),
    "env_reference": lambda r: r.choice(
        [
            ("password=", "${DB_PASSWORD}", ""),
            ("api_key = ", 'os.environ["API_KEY"]', ""),
            ("token: ", "$API_TOKEN", ""),
            ('secret = "', "{{ vault_secret }}", '"'),
            ("postgres://app:", "${PGPASSWORD}", "@db:5432/main"),
        ]
    ),
    "placeholder": lambda r: r.choice(
        [
            ('api_key = "', "<your-api-key>", '"'),
            ("password: ", "xxxxxxxx", ""),
            ("password=", "changeme", ""),
            ("password=", "password", ""),
            ('secret = "', "********", '"'),
            ("token: ", "YOUR_TOKEN_HERE", ""),
            ("mysql://user:", "password", "@localhost/db"),
        ]
    ),
    "aws_documented_example": lambda r: r.choice(
        [
            ("aws_access_key_id = ", AWS_EXAMPLE_KEY_ID, ""),
            ("aws_secret_access_key = ", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""),
        ]
    ),
    "aws_secret_look_alike": _aws_secret_look_alike,
    "low_entropy_assignment": lambda r: r.choice(
        [
            ('password = "', r.choice(string.ascii_lowercase) * r.randint(8, 20), '"'),
            ("secret: ", "ab" * r.randint(4, 10), ""),
            ('api_key="', "1234" * r.randint(2, 5), '"'),
            ('token = "', "bert-base-uncased", '"'),
        ]
    ),
}


def hard_negative_sample(kind: str, rng: random.Random) -> Sample:
    return _sample(kind, *HARD_NEGATIVE_BUILDERS[kind](rng))
