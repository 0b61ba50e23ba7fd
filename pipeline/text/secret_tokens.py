"""Provider tokens as data: one entry per token type whose documented format starts with a
literal prefix, from which both the detector's rule (pipeline/text/secrets.py) and the tests'
generator (tests/credential_factory.py) are made, so that the two can never disagree.

An entry is the type's name, its parts (literal strings and runs of one alphabet: a fixed
length or a range), and where the format is documented. The provider's own documentation is
the source wherever it states the format; gitleaks (MIT) and TruffleHog (AGPL) served only as
lists of which providers to cover, not as code or tests. A token is matched as a whole word:
not glued to a longer run of letters, digits, `_` or `-`.
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass

ALNUM = "A-Za-z0-9"
LOWER_ALNUM = "a-z0-9"
UPPER_ALNUM = "A-Z0-9"
HEX = "0-9a-f"
B64URL = "A-Za-z0-9_\\-"

MIN_LITERAL = 4  # shorter literals (`pat` is in "path") pick too many rows to be a filter
Run = tuple[str, int] | tuple[str, int, int]  # (alphabet, length) or (alphabet, least, most)


@dataclass(frozen=True)
class TokenFormat:
    type: str
    parts: tuple[str | Run, ...]
    source: str

    @property
    def prefix(self) -> str:
        return self.parts[0] if isinstance(self.parts[0], str) else ""

    @property
    def literal(self) -> str:
        """The longest literal part (every token holds it), which picks the rows to search
        when it is long enough to be rare, or when the token does not start with it (a
        pattern starting with a run of a class slows the regex pass of every row); "" for a
        short prefix (`pat`, `sl.`: "path"), which the regex pass handles."""
        longest = max((part for part in self.parts if isinstance(part, str)), key=len)
        starts_with_a_run = not isinstance(self.parts[0], str)
        return longest if len(longest) >= MIN_LITERAL or starts_with_a_run else ""

    @property
    def pattern(self) -> str:
        """The token, whole (the caller adds the word boundaries)."""
        pieces = []
        for part in self.parts:
            if isinstance(part, str):
                pieces.append(re.escape(part))
            elif len(part) == 2:
                pieces.append(f"[{part[0]}]{{{part[1]}}}")
            else:
                pieces.append(f"[{part[0]}]{{{part[1]},{part[2]}}}")
        return "".join(pieces)

    def sample(self, rng: random.Random) -> str:
        """A random token of this format (for tests and benches: never a live one)."""
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            length = part[1] if len(part) == 2 else rng.randint(part[1], part[2])
            out.append("".join(rng.choice(_characters(part[0])) for _ in range(length)))
        return "".join(out)


BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def base62_crc32(text: str) -> str:
    """The checksum GitHub and npm append to their tokens: the CRC32 of the 30 random
    characters, in base62 (digits, upper, lower), 6 characters with leading zeros
    (https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/)."""
    value, digits = zlib.crc32(text.encode()), ""
    while value:
        value, digit = divmod(value, 62)
        digits = BASE62[digit] + digits
    return digits.rjust(6, "0")


def _characters(alphabet: str) -> str:
    """The characters of a class body such as `A-Za-z0-9_\\-`."""
    chars, body, i = [], alphabet.replace("\\-", "\0"), 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            chars += [chr(c) for c in range(ord(body[i]), ord(body[i + 2]) + 1)]
            i += 3
        else:
            chars.append("-" if body[i] == "\0" else body[i])
            i += 1
    return "".join(chars)


TOKEN_FORMATS: tuple[TokenFormat, ...] = (
    # code hosting and CI
    TokenFormat("gitlab_oauth_app_secret", ("gloas-", (HEX, 64)),
                "https://docs.gitlab.com/security/tokens/#token-prefixes"),
    TokenFormat("gitlab_runner_registration_token", ("GR1348941", (B64URL, 20)),
                "https://docs.gitlab.com/security/tokens/#token-prefixes"),
    TokenFormat("gitlab_feed_token", ("glft-", (B64URL, 20)),
                "https://docs.gitlab.com/security/tokens/#token-prefixes"),
    TokenFormat("gitlab_incoming_mail_token", ("glimt-", (B64URL, 25)),
                "https://docs.gitlab.com/security/tokens/#token-prefixes"),
    TokenFormat("gitlab_agent_token", ("glagent-", (B64URL, 50)),
                "https://docs.gitlab.com/security/tokens/#token-prefixes"),
    TokenFormat("gitlab_scim_token", ("glsoat-", (B64URL, 20)),
                "https://docs.gitlab.com/security/tokens/#token-prefixes"),
    TokenFormat("gitlab_feature_flags_token", ("glffct-", (B64URL, 20)),
                "https://docs.gitlab.com/security/tokens/#token-prefixes"),
    TokenFormat("gitlab_ci_build_token", ("glcbt-", (HEX, 1, 5), "_", (B64URL, 20)),
                "https://docs.gitlab.com/security/tokens/#token-prefixes"),
    TokenFormat("bitbucket_app_password", ("ATBB", (ALNUM, 32)),
                "https://support.atlassian.com/bitbucket-cloud/docs/app-passwords/"),
    TokenFormat("circleci_personal_token", ("CCIPAT_", (ALNUM, 22), "_", (HEX, 40)),
                "https://circleci.com/docs/managing-api-tokens/"),
    TokenFormat("rubygems_api_key", ("rubygems_", (HEX, 48)),
                "https://guides.rubygems.org/api-key-scopes/"),
    TokenFormat("nuget_api_key", ("oy2", (LOWER_ALNUM, 43)),
                "https://learn.microsoft.com/nuget/nuget-org/scoped-api-keys"),
    TokenFormat("docker_hub_token", ("dckr_pat_", (B64URL, 27)),
                "https://docs.docker.com/security/for-developers/access-tokens/"),
    TokenFormat("clojars_token", ("CLOJARS_", (HEX, 60)),
                "https://github.com/clojars/clojars-web/wiki/Deploy-Tokens"),
    TokenFormat("sourcegraph_token", ("sgp_", (HEX, 40)),
                "https://sourcegraph.com/docs/cli/how-tos/creating_an_access_token"),
    TokenFormat("pulumi_token", ("pul-", (HEX, 40)),
                "https://www.pulumi.com/docs/pulumi-cloud/access-management/access-tokens/"),
    TokenFormat("terraform_cloud_token", ((ALNUM, 14), ".atlasv1.", (B64URL, 60, 70)),
                "https://developer.hashicorp.com/terraform/cloud-docs/users-teams-organizations/api-tokens"),
    TokenFormat("vault_service_token", ("hvs.", (B64URL, 24, 120)),
                "https://developer.hashicorp.com/vault/docs/concepts/tokens#token-prefixes"),
    TokenFormat("vault_batch_token", ("hvb.", (B64URL, 24, 200)),
                "https://developer.hashicorp.com/vault/docs/concepts/tokens#token-prefixes"),
    TokenFormat("doppler_token", ("dp.pt.", (ALNUM, 43)),
                "https://docs.doppler.com/reference/auth-token-formats"),
    TokenFormat("postman_api_key", ("PMAK-", (HEX, 24), "-", (HEX, 34)),
                "https://learning.postman.com/docs/developer/postman-api/authentication/"),
    TokenFormat("prefect_api_key", ("pnu_", (ALNUM, 36)),
                "https://docs.prefect.io/v3/manage/cloud/manage-users/api-keys"),
    TokenFormat("octopus_deploy_api_key", ("API-", (UPPER_ALNUM, 26)),
                "https://octopus.com/docs/octopus-rest-api/how-to-create-an-api-key"),
    TokenFormat("infracost_api_key", ("ico-", (ALNUM, 32)),
                "https://www.infracost.io/docs/integrations/infracost_api/"),
    TokenFormat("readme_api_key", ("rdme_", (LOWER_ALNUM, 70)),
                "https://docs.readme.com/main/reference/intro/authentication"),
    TokenFormat("tailscale_key", ("tskey-", ("a-z", 3, 6), "-", (ALNUM, 10, 20), "-", (ALNUM, 30, 40)),
                "https://tailscale.com/kb/1277/key-prefixes"),
    TokenFormat("onepassword_service_token", ("ops_eyJ", (B64URL, 250, 1000)),
                "https://developer.1password.com/docs/service-accounts/"),
    # cloud
    TokenFormat("alibaba_access_key_id", ("LTAI", (ALNUM, 20)),
                "https://www.alibabacloud.com/help/en/ram/user-guide/create-an-accesskey-pair"),
    TokenFormat("azure_ad_client_secret", ((ALNUM, 3), "8Q~", (B64URL, 34)),
                "https://learn.microsoft.com/entra/identity-platform/how-to-add-credentials"),
    TokenFormat("heroku_api_key", ("HRKU-", (B64URL, 60)),
                "https://devcenter.heroku.com/articles/authentication"),
    TokenFormat("fly_io_token", ("fo1_", (B64URL, 43)),
                "https://fly.io/docs/security/tokens/"),
    TokenFormat("google_oauth_client_secret", ("GOCSPX-", (B64URL, 28)),
                "https://developers.google.com/identity/protocols/oauth2"),
    TokenFormat("google_oauth_access_token", ("ya29.", (B64URL, 30, 500)),
                "https://developers.google.com/identity/protocols/oauth2"),
    TokenFormat("supabase_token", ("sbp_", (HEX, 40)),
                "https://supabase.com/docs/reference/api/introduction"),
    TokenFormat("planetscale_token", ("pscale_tkn_", (B64URL, 43)),
                "https://planetscale.com/docs/concepts/service-tokens"),
    TokenFormat("planetscale_password", ("pscale_pw_", (B64URL, 43)),
                "https://planetscale.com/docs/concepts/connection-strings"),
    TokenFormat("planetscale_oauth_token", ("pscale_oauth_", (B64URL, 32, 64)),
                "https://planetscale.com/docs/concepts/service-tokens"),
    TokenFormat("render_api_key", ("rnd_", (ALNUM, 32)),
                "https://render.com/docs/api#1-create-an-api-key"),
    TokenFormat("dynatrace_api_token", ("dt0c01.", (UPPER_ALNUM, 24), ".", (UPPER_ALNUM, 64)),
                "https://docs.dynatrace.com/docs/manage/identity-access-management/access-tokens-and-oauth-clients/access-tokens"),
    # messaging and SaaS
    TokenFormat("slack_app_token", ("xapp-", ("0-9", 1), "-", (UPPER_ALNUM, 9, 12), "-", ("0-9", 13), "-", (HEX, 64)),
                "https://api.slack.com/authentication/token-types#app"),
    TokenFormat("stripe_webhook_secret", ("whsec_", (ALNUM, 32)),
                "https://docs.stripe.com/webhooks#verify-official-libraries"),
    TokenFormat("shopify_access_token", ("shpat_", (HEX, 32)),
                "https://shopify.dev/docs/apps/build/authentication-authorization/access-tokens"),
    TokenFormat("shopify_custom_app_token", ("shpca_", (HEX, 32)),
                "https://shopify.dev/docs/apps/build/authentication-authorization/access-tokens"),
    TokenFormat("shopify_private_app_token", ("shppa_", (HEX, 32)),
                "https://shopify.dev/docs/apps/build/authentication-authorization/access-tokens"),
    TokenFormat("shopify_shared_secret", ("shpss_", (HEX, 32)),
                "https://shopify.dev/docs/apps/build/authentication-authorization/client-secrets"),
    TokenFormat("square_oauth_secret", ("sq0csp-", (B64URL, 43)),
                "https://developer.squareup.com/docs/oauth-api/overview"),
    TokenFormat("braintree_access_token", ("access_token$production$", (LOWER_ALNUM, 16), "$", (HEX, 32)),
                "https://developer.paypal.com/braintree/docs/guides/authorization/access-tokens"),
    TokenFormat("plaid_access_token", ("access-", ("a-z", 7, 11), "-", (HEX, 8), "-", (HEX, 4), "-", (HEX, 4), "-", (HEX, 4), "-", (HEX, 12)),
                "https://plaid.com/docs/api/items/#token-exchange-flow"),
    TokenFormat("notion_integration_token", ("ntn_", (ALNUM, 46)),
                "https://developers.notion.com/docs/authorization"),
    TokenFormat("notion_secret", ("secret_", (ALNUM, 43)),
                "https://developers.notion.com/docs/authorization"),
    TokenFormat("linear_api_key", ("lin_api_", (ALNUM, 40)),
                "https://linear.app/developers/graphql#personal-api-keys"),
    TokenFormat("atlassian_api_token", ("ATATT3", (B64URL, 186)),
                "https://support.atlassian.com/atlassian-account/docs/manage-api-tokens-for-your-atlassian-account/"),
    TokenFormat("airtable_personal_token", ("pat", (ALNUM, 14), ".", (HEX, 64)),
                "https://airtable.com/developers/web/guides/personal-access-tokens"),
    TokenFormat("hubspot_private_app_token", ("pat-", ("a-z", 2), ("0-9", 1), "-", (HEX, 8), "-", (HEX, 4), "-", (HEX, 4), "-", (HEX, 4), "-", (HEX, 12)),
                "https://developers.hubspot.com/docs/api/private-apps"),
    TokenFormat("mailgun_api_key", ("key-", (HEX, 32)),
                "https://documentation.mailgun.com/docs/mailgun/api-reference/authentication/"),
    TokenFormat("brevo_api_key", ("xkeysib-", (HEX, 64), "-", (ALNUM, 16)),
                "https://developers.brevo.com/docs/getting-started"),
    TokenFormat("typeform_token", ("tfp_", (B64URL, 44), "_", (ALNUM, 14)),
                "https://www.typeform.com/developers/get-started/personal-access-token/"),
    TokenFormat("contentful_token", ("CFPAT-", (B64URL, 43)),
                "https://www.contentful.com/developers/docs/references/authentication/"),
    TokenFormat("figma_token", ("figd_", (B64URL, 40)),
                "https://www.figma.com/developers/api#access-tokens"),
    TokenFormat("mapbox_secret_token", ("sk.eyJ", (B64URL, 50, 120), ".", (B64URL, 22)),
                "https://docs.mapbox.com/accounts/guides/tokens/"),
    TokenFormat("dropbox_token", ("sl.", (B64URL, 130, 1400)),
                "https://developers.dropbox.com/oauth-guide"),
    TokenFormat("telegram_bot_token", (("0-9", 8, 10), ":AA", (B64URL, 33)),
                "https://core.telegram.org/bots/api#authorizing-your-bot"),
    TokenFormat("facebook_access_token", ("EAACEdEose0cBA", (ALNUM, 60, 200)),
                "https://developers.facebook.com/docs/facebook-login/guides/access-tokens"),
    TokenFormat("shippo_api_token", ("shippo_", ("a-z", 4), "_", (HEX, 40)),
                "https://docs.goshippo.com/docs/guides_general/authentication/"),
    TokenFormat("duffel_api_token", ("duffel_", ("a-z", 4), "_", (B64URL, 43)),
                "https://duffel.com/docs/api/overview/making-requests/authentication"),
    TokenFormat("easypost_api_key", ("EZAK", (ALNUM, 54)),
                "https://docs.easypost.com/docs/authentication"),
    TokenFormat("flutterwave_secret_key", ("FLWSECK_TEST-", (HEX, 32), "-X"),
                "https://developer.flutterwave.com/docs/authentication"),
    TokenFormat("frameio_token", ("fio-u-", (B64URL, 64)),
                "https://developer.frame.io/docs/getting-started/authentication"),
    TokenFormat("scalingo_token", ("tk-us-", (B64URL, 48)),
                "https://doc.scalingo.com/platform/user-management/api-tokens"),
    TokenFormat("adafruit_io_key", ("aio_", (ALNUM, 28)),
                "https://io.adafruit.com/api/docs/#authentication"),
    # observability
    TokenFormat("sentry_org_token", ("sntrys_eyJ", (B64URL, 60, 300)),
                "https://docs.sentry.io/account/auth-tokens/"),
    TokenFormat("sentry_user_token", ("sntryu_", (HEX, 64)),
                "https://docs.sentry.io/account/auth-tokens/"),
    TokenFormat("grafana_cloud_token", ("glc_", (B64URL, 32, 400)),
                "https://grafana.com/docs/grafana-cloud/account-management/authentication-and-permissions/access-policies/"),
    TokenFormat("grafana_service_account_token", ("glsa_", (ALNUM, 32), "_", (HEX, 8)),
                "https://grafana.com/docs/grafana/latest/administration/service-accounts/"),
    TokenFormat("new_relic_user_key", ("NRAK-", (UPPER_ALNUM, 27)),
                "https://docs.newrelic.com/docs/apis/intro-apis/new-relic-api-keys/"),
    TokenFormat("new_relic_insert_key", ("NRII-", (B64URL, 32)),
                "https://docs.newrelic.com/docs/apis/intro-apis/new-relic-api-keys/"),
    TokenFormat("new_relic_browser_key", ("NRJS-", (HEX, 19)),
                "https://docs.newrelic.com/docs/apis/intro-apis/new-relic-api-keys/"),
    # AI
    TokenFormat("groq_api_key", ("gsk_", (ALNUM, 52)),
                "https://console.groq.com/docs/quickstart"),
    TokenFormat("perplexity_api_key", ("pplx-", (ALNUM, 48)),
                "https://docs.perplexity.ai/guides/getting-started"),
    TokenFormat("replicate_api_token", ("r8_", (ALNUM, 37)),
                "https://replicate.com/docs/reference/http#authentication"),
    TokenFormat("xai_api_key", ("xai-", (ALNUM, 80)),
                "https://docs.x.ai/docs/overview"),
    TokenFormat("huggingface_org_token", ("api_org_", (ALNUM, 34)),
                "https://huggingface.co/docs/hub/security-tokens"),
    # keys
    TokenFormat("age_secret_key", ("AGE-SECRET-KEY-1", ("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
                "https://age-encryption.org/v1"),
)  # fmt: skip
