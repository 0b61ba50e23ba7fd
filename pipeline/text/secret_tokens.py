"""Provider tokens as data: one entry per token type, from which both the detector's rule
(pipeline/text/secrets.py) and the tests' generator (tests/credential_factory.py) are made, so
that the two can never disagree.

An entry is the type's name, its parts (literal strings and runs of one alphabet: a fixed
length or a range), where the format is documented, and, for a format without a literal
prefix of its own (a Datadog key is 32 hex digits), the keywords of the names it is assigned
to (`DATADOG_API_KEY=…`, `"datadogAppKey": "…"`, `<datadog_key>…</datadog_key>`): such a
value is found only after a name holding one of them. The provider's own documentation is
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
B64 = "A-Za-z0-9+/"

MIN_LITERAL = 4  # shorter literals (`pat` is in "path") pick too many rows to be a filter
Run = tuple[str, int] | tuple[str, int, int]  # (alphabet, length) or (alphabet, least, most)
UUID: tuple[Run | str, ...] = ((HEX, 8), "-", (HEX, 4), "-", (HEX, 4), "-", (HEX, 4), "-", (HEX, 12))  # fmt: skip


@dataclass(frozen=True)
class TokenFormat:
    type: str
    parts: tuple[str | Run, ...]
    source: str
    keywords: tuple[str, ...] = ()  # lowercase; set: found only after a name holding one

    @property
    def keyword_spellings(self) -> tuple[str, ...]:
        """The keywords as names spell them: `mongodb_atlas`, `mongodb-atlas`, `mongodbatlas`."""
        spellings = {
            re.sub(r"[_\-]", joiner, keyword) for keyword in self.keywords for joiner in "_-"
        } | {re.sub(r"[_\-]", "", keyword) for keyword in self.keywords if len(keyword) > 5}
        return tuple(sorted(spellings))

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
        return "".join(
            part if isinstance(part, str) else self.sample_run(part, rng) for part in self.parts
        )

    @staticmethod
    def sample_run(run: Run, rng: random.Random, shorter: bool = False) -> str:
        """Random characters of the run's alphabet, of its length (one fewer than its least
        with `shorter`)."""
        length = run[1] if len(run) == 2 or shorter else rng.randint(run[1], run[2])
        length -= shorter
        return "".join(rng.choice(_characters(run[0])) for _ in range(length))


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
    # more formats with a literal part of their own
    TokenFormat("cloudflare_origin_ca_key", ("v1.0-", (HEX, 24), "-", (HEX, 146)),
                "https://developers.cloudflare.com/fundamentals/api/get-started/ca-keys/"),
    TokenFormat("scaleway_access_key", ("SCW", (UPPER_ALNUM, 17)),
                "https://www.scaleway.com/en/docs/iam/concepts/#api-key"),
    TokenFormat("yandex_api_key", ("AQVN", (B64URL, 35, 38)),
                "https://yandex.cloud/en/docs/iam/concepts/authorization/api-key"),
    TokenFormat("tencent_secret_id", ("AKID", (ALNUM, 32)),
                "https://www.tencentcloud.com/document/product/598/32675"),
    TokenFormat("netlify_token", ("nfp_", (ALNUM, 36)),
                "https://docs.netlify.com/api/get-started/#authentication"),
    TokenFormat("gcp_hmac_access_id", ("GOOG1", (UPPER_ALNUM, 56)),
                "https://cloud.google.com/storage/docs/authentication/hmackeys"),
    TokenFormat("aws_bedrock_api_key", ("ABSKQmVkcm9ja0FQSUtleS", (B64, 100, 200)),
                "https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys.html"),
    TokenFormat("firebase_cloud_messaging_key", ((B64URL, 11), ":APA91b", (B64URL, 134)),
                "https://firebase.google.com/docs/cloud-messaging/auth-server"),
    TokenFormat("neon_api_key", ("napi_", (LOWER_ALNUM, 64)),
                "https://neon.tech/docs/manage/api-keys"),
    TokenFormat("clickhouse_cloud_key_secret", ("4b1d", (ALNUM, 38)),
                "https://clickhouse.com/docs/cloud/manage/openapi"),
    TokenFormat("supabase_secret_key", ("sb_secret_", (B64URL, 31)),
                "https://supabase.com/docs/guides/api/api-keys"),
    TokenFormat("openrouter_api_key", ("sk-or-v1-", (HEX, 64)),
                "https://openrouter.ai/docs/api-reference/authentication"),
    TokenFormat("langsmith_personal_token", ("lsv2_pt_", (HEX, 32), "_", (HEX, 10)),
                "https://docs.smith.langchain.com/administration/how_to_guides/organization_management/create_account_api_key"),
    TokenFormat("langsmith_service_key", ("lsv2_sk_", (HEX, 32), "_", (HEX, 10)),
                "https://docs.smith.langchain.com/administration/how_to_guides/organization_management/create_account_api_key"),
    TokenFormat("pinecone_api_key", ("pcsk_", (ALNUM, 4, 6), "_", (ALNUM, 60, 70)),
                "https://docs.pinecone.io/guides/projects/manage-api-keys"),
    TokenFormat("elevenlabs_api_key", ("sk_", (HEX, 48)),
                "https://elevenlabs.io/docs/api-reference/authentication"),
    TokenFormat("cerebras_api_key", ("csk-", (LOWER_ALNUM, 48)),
                "https://inference-docs.cerebras.ai/quickstart"),
    TokenFormat("sonarqube_user_token", ("squ_", (HEX, 40)),
                "https://docs.sonarsource.com/sonarqube-server/latest/user-guide/managing-tokens/"),
    TokenFormat("sonarqube_project_token", ("sqp_", (HEX, 40)),
                "https://docs.sonarsource.com/sonarqube-server/latest/user-guide/managing-tokens/"),
    TokenFormat("sonarqube_analysis_token", ("sqa_", (HEX, 40)),
                "https://docs.sonarsource.com/sonarqube-server/latest/user-guide/managing-tokens/"),
    TokenFormat("buildkite_api_token", ("bkua_", (HEX, 40)),
                "https://buildkite.com/docs/apis/managing-api-tokens"),
    TokenFormat("crates_io_token", ("cio", (ALNUM, 32)),
                "https://doc.rust-lang.org/cargo/reference/registry-authentication.html"),
    TokenFormat("artifactory_api_key", ("AKCp", (ALNUM, 69)),
                "https://jfrog.com/help/r/jfrog-platform-administration-documentation/api-keys"),
    TokenFormat("jfrog_reference_token", ("cmVmdGtuOjAxOj", (ALNUM, 50)),
                "https://jfrog.com/help/r/jfrog-platform-administration-documentation/access-tokens"),
    TokenFormat("slack_config_access_token", ("xoxe.xox", ("bp", 1), "-1-", (ALNUM, 163, 166)),
                "https://api.slack.com/authentication/config-tokens"),
    TokenFormat("slack_config_refresh_token", ("xoxe-1-", (ALNUM, 146)),
                "https://api.slack.com/authentication/config-tokens"),
    TokenFormat("microsoft_teams_webhook", ("https://", (LOWER_ALNUM, 3, 30), ".webhook.office.com/webhookb2/", *UUID, "@", *UUID, "/IncomingWebhook/", (HEX, 32), "/", *UUID),
                "https://learn.microsoft.com/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook"),
    TokenFormat("zapier_webhook_url", ("https://hooks.zapier.com/hooks/catch/", ("0-9", 5, 10), "/", (LOWER_ALNUM, 6, 8)),
                "https://help.zapier.com/hc/en-us/articles/8496288690317"),
    TokenFormat("square_access_token", ("sq0atp-", (B64URL, 22)),
                "https://developer.squareup.com/docs/build-basics/access-tokens"),
    TokenFormat("square_access_token", ("EAAA", (B64URL, 60)),
                "https://developer.squareup.com/docs/build-basics/access-tokens"),
    TokenFormat("clickup_api_token", ("pk_", ("0-9", 6, 10), "_", (UPPER_ALNUM, 32)),
                "https://clickup.com/api/developer-portal/authentication/"),
    TokenFormat("woocommerce_consumer_secret", ("cs_", (HEX, 40)),
                "https://woocommerce.github.io/woocommerce-rest-api-docs/#authentication"),
    TokenFormat("riot_games_api_key", ("RGAPI-", *UUID),
                "https://developer.riotgames.com/docs/portal"),
    TokenFormat("amazon_mws_token", ("amzn.mws.", *UUID),
                "https://developer-docs.amazon.com/sp-api/docs/"),
    TokenFormat("onepassword_secret_key", ("A3-", (UPPER_ALNUM, 6), "-", (UPPER_ALNUM, 6), "-", (UPPER_ALNUM, 5), "-", (UPPER_ALNUM, 5), "-", (UPPER_ALNUM, 5), "-", (UPPER_ALNUM, 5), "-", (UPPER_ALNUM, 5)),
                "https://support.1password.com/secret-key/"),
    TokenFormat("doppler_service_token", ("dp.st.", (ALNUM, 40, 44)),
                "https://docs.doppler.com/reference/auth-token-formats"),
    TokenFormat("doppler_cli_token", ("dp.ct.", (ALNUM, 40, 44)),
                "https://docs.doppler.com/reference/auth-token-formats"),
    TokenFormat("doppler_scim_token", ("dp.scim.", (ALNUM, 40, 44)),
                "https://docs.doppler.com/reference/auth-token-formats"),
    TokenFormat("doppler_audit_token", ("dp.audit.", (ALNUM, 40, 44)),
                "https://docs.doppler.com/reference/auth-token-formats"),
    TokenFormat("doppler_service_account_token", ("dp.sa.", (ALNUM, 40, 44)),
                "https://docs.doppler.com/reference/auth-token-formats"),
    TokenFormat("vault_recovery_token", ("hvr.", (B64URL, 24, 120)),
                "https://developer.hashicorp.com/vault/docs/concepts/tokens#token-prefixes"),
    TokenFormat("new_relic_rest_api_key", ("NRRA-", (HEX, 42)),
                "https://docs.newrelic.com/docs/apis/intro-apis/new-relic-api-keys/"),
    TokenFormat("new_relic_insights_query_key", ("NRIQ-", (B64URL, 32)),
                "https://docs.newrelic.com/docs/apis/intro-apis/new-relic-api-keys/"),
    TokenFormat("new_relic_license_key", ((HEX, 36), "NRAL"),
                "https://docs.newrelic.com/docs/apis/intro-apis/new-relic-api-keys/"),
    TokenFormat("grafana_api_key", ("eyJrIjoi", (B64URL, 70, 400)),
                "https://grafana.com/docs/grafana/latest/administration/api-keys/"),
    TokenFormat("easypost_test_api_key", ("EZTK", (ALNUM, 54)),
                "https://docs.easypost.com/docs/authentication"),
    TokenFormat("flutterwave_secret_key", ("FLWSECK-", (HEX, 32), "-X"),
                "https://developer.flutterwave.com/docs/authentication"),
    TokenFormat("flutterwave_encryption_key", ("FLWSECK_TEST", (HEX, 12)),
                "https://developer.flutterwave.com/docs/authentication"),
    TokenFormat("brevo_smtp_key", ("xsmtpsib-", (HEX, 64), "-", (ALNUM, 16)),
                "https://developers.brevo.com/docs/getting-started"),
    TokenFormat("posthog_personal_api_key", ("phx_", (ALNUM, 40, 50)),
                "https://posthog.com/docs/api#private-endpoint-authentication"),
    TokenFormat("resend_api_key", ("re_", (ALNUM, 8), "_", (ALNUM, 24)),
                "https://resend.com/docs/dashboard/api-keys/introduction"),
    TokenFormat("akamai_edgegrid_token", ("akab-", (LOWER_ALNUM, 16), "-", (LOWER_ALNUM, 16)),
                "https://techdocs.akamai.com/developer/docs/set-up-authentication-credentials"),
    TokenFormat("gocardless_access_token", ("live_", (B64URL, 40)),
                "https://developer.gocardless.com/getting-started/api/making-your-first-request/"),
    TokenFormat("mollie_api_key", ("live_", (ALNUM, 30)),
                "https://docs.mollie.com/reference/authentication"),
    TokenFormat("twitter_bearer_token", ("AAAAAAAAAAAAAAAAAAAAA", ("A-Za-z0-9%", 80, 120)),
                "https://developer.x.com/en/docs/authentication/oauth-2-0/bearer-tokens"),
    # formats without a literal part: found after a name holding a keyword
    TokenFormat("datadog_api_key", ((HEX, 32),), "https://docs.datadoghq.com/account_management/api-app-keys/",
                keywords=('datadog', 'dd_api')),
    TokenFormat("datadog_app_key", ((HEX, 40),), "https://docs.datadoghq.com/account_management/api-app-keys/",
                keywords=('datadog', 'dd_app')),
    TokenFormat("cloudflare_api_token", ((B64URL, 40),), "https://developers.cloudflare.com/fundamentals/api/get-started/create-token/",
                keywords=('cloudflare', 'cf_api')),
    TokenFormat("cloudflare_global_api_key", ((HEX, 37),), "https://developers.cloudflare.com/fundamentals/api/get-started/keys/",
                keywords=('cloudflare', 'cf_api')),
    TokenFormat("okta_api_token", ("00", (B64URL, 40)), "https://developer.okta.com/docs/guides/create-an-api-token/",
                keywords=('okta',)),
    TokenFormat("vercel_token", ((ALNUM, 24),), "https://vercel.com/docs/rest-api#creating-an-access-token",
                keywords=('vercel',)),
    TokenFormat("twilio_auth_token", ((HEX, 32),), "https://www.twilio.com/docs/iam/api/authtoken",
                keywords=('twilio',)),
    TokenFormat("algolia_admin_key", ((HEX, 32),), "https://www.algolia.com/doc/guides/security/api-keys/",
                keywords=('algolia',)),
    TokenFormat("cohere_api_key", ((ALNUM, 40),), "https://docs.cohere.com/reference/about",
                keywords=('cohere', 'co_api')),
    TokenFormat("mistral_api_key", ((ALNUM, 32),), "https://docs.mistral.ai/getting-started/quickstart/",
                keywords=('mistral',)),
    TokenFormat("deepseek_api_key", ("sk-", (HEX, 32)), "https://api-docs.deepseek.com/",
                keywords=('deepseek',)),
    TokenFormat("together_api_key", ((HEX, 64),), "https://docs.together.ai/reference/authentication-1",
                keywords=('togetherai', 'together_ai', 'together_api', 'together-api')),
    TokenFormat("stability_api_key", ("sk-", (ALNUM, 48)), "https://platform.stability.ai/docs/getting-started/authentication",
                keywords=('stability',)),
    TokenFormat("wandb_api_key", ((HEX, 40),), "https://docs.wandb.ai/guides/track/environment-variables/",
                keywords=('wandb',)),
    TokenFormat("deepgram_api_key", ((HEX, 40),), "https://developers.deepgram.com/docs/authenticating",
                keywords=('deepgram',)),
    TokenFormat("assemblyai_api_key", ((HEX, 32),), "https://www.assemblyai.com/docs/api-reference/overview",
                keywords=('assemblyai',)),
    TokenFormat("linode_token", ((HEX, 64),), "https://techdocs.akamai.com/linode-api/reference/get-started#personal-access-tokens",
                keywords=('linode',)),
    TokenFormat("vultr_api_key", ((UPPER_ALNUM, 36),), "https://docs.vultr.com/platform/other/api/",
                keywords=('vultr',)),
    TokenFormat("hetzner_cloud_token", ((ALNUM, 64),), "https://docs.hetzner.cloud/#authentication",
                keywords=('hetzner', 'hcloud')),
    TokenFormat("ibm_cloud_api_key", ((B64URL, 44),), "https://cloud.ibm.com/docs/account?topic=account-userapikey",
                keywords=('ibmcloud', 'ibm_cloud', 'ibm-cloud', 'ibm_api')),
    TokenFormat("fastly_api_token", ((B64URL, 32),), "https://docs.fastly.com/en/guides/using-api-tokens",
                keywords=('fastly',)),
    TokenFormat("railway_token", UUID, "https://docs.railway.com/reference/public-api",
                keywords=('railway',)),
    TokenFormat("heroku_legacy_api_key", UUID, "https://devcenter.heroku.com/articles/authentication",
                keywords=('heroku',)),
    TokenFormat("auth0_client_secret", ((B64URL, 64),), "https://auth0.com/docs/get-started/applications/application-credentials",
                keywords=('auth0',)),
    TokenFormat("zendesk_api_token", ((ALNUM, 40),), "https://developer.zendesk.com/api-reference/introduction/security-and-auth/",
                keywords=('zendesk',)),
    TokenFormat("intercom_access_token", ((B64URL, 59), "="), "https://developers.intercom.com/docs/build-an-integration/learn-more/authentication",
                keywords=('intercom',)),
    TokenFormat("freshdesk_api_key", ((ALNUM, 20),), "https://developers.freshdesk.com/api/#authentication",
                keywords=('freshdesk',)),
    TokenFormat("asana_personal_token", (("0-9", 1), "/", ("0-9", 13, 19), ":", (HEX, 32)), "https://developers.asana.com/docs/personal-access-token",
                keywords=('asana',)),
    TokenFormat("trello_api_token", ((HEX, 64),), "https://developer.atlassian.com/cloud/trello/guides/rest-api/authorization/",
                keywords=('trello',)),
    TokenFormat("mattermost_access_token", ((LOWER_ALNUM, 26),), "https://developers.mattermost.com/integrate/reference/personal-access-token/",
                keywords=('mattermost',)),
    TokenFormat("zulip_api_key", ((ALNUM, 32),), "https://zulip.com/api/api-keys",
                keywords=('zulip',)),
    TokenFormat("pushover_token", ((LOWER_ALNUM, 30),), "https://pushover.net/api#registration",
                keywords=('pushover',)),
    TokenFormat("pushbullet_access_token", ("o.", (ALNUM, 32)), "https://docs.pushbullet.com/#authentication",
                keywords=('pushbullet',)),
    TokenFormat("mandrill_api_key", ((B64URL, 22),), "https://mailchimp.com/developer/transactional/guides/quick-start/",
                keywords=('mandrill',)),
    TokenFormat("postmark_server_token", UUID, "https://postmarkapp.com/developer/api/overview#authentication",
                keywords=('postmark',)),
    TokenFormat("sparkpost_api_key", ((HEX, 40),), "https://developers.sparkpost.com/api/#header-authentication",
                keywords=('sparkpost',)),
    TokenFormat("mailjet_api_secret", ((HEX, 32),), "https://dev.mailjet.com/email/guides/",
                keywords=('mailjet',)),
    TokenFormat("messagebird_api_key", ((ALNUM, 25),), "https://developers.messagebird.com/api/#authentication",
                keywords=('messagebird',)),
    TokenFormat("vonage_api_secret", ((ALNUM, 16),), "https://developer.vonage.com/en/getting-started/concepts/authentication",
                keywords=('vonage', 'nexmo')),
    TokenFormat("plivo_auth_token", ((ALNUM, 40),), "https://www.plivo.com/docs/messaging/api/overview/#authentication",
                keywords=('plivo',)),
    TokenFormat("pusher_app_secret", ((HEX, 20),), "https://pusher.com/docs/channels/server_api/http-api/",
                keywords=('pusher',)),
    TokenFormat("sumologic_access_key", ((ALNUM, 64),), "https://help.sumologic.com/docs/manage/security/access-keys/",
                keywords=('sumologic', 'sumo_', 'sumo-')),
    TokenFormat("honeycomb_api_key", ((ALNUM, 22),), "https://docs.honeycomb.io/get-started/configure/environments/manage-api-keys/",
                keywords=('honeycomb',)),
    TokenFormat("rollbar_access_token", ((HEX, 32),), "https://docs.rollbar.com/reference/getting-started-1#authentication",
                keywords=('rollbar',)),
    TokenFormat("bugsnag_api_key", ((HEX, 32),), "https://docs.bugsnag.com/api/data-access/#authentication",
                keywords=('bugsnag',)),
    TokenFormat("logzio_token", ((ALNUM, 32),), "https://docs.logz.io/docs/user-guide/admin/authentication-tokens/",
                keywords=('logzio', 'logz_io', 'logz-io')),
    TokenFormat("loggly_token", UUID, "https://documentation.solarwinds.com/en/success_center/loggly/content/admin/customer-token-authentication-token.htm",
                keywords=('loggly',)),
    TokenFormat("splunk_hec_token", UUID, "https://docs.splunk.com/Documentation/Splunk/latest/Data/UsetheHTTPEventCollector",
                keywords=('splunk',)),
    TokenFormat("pagerduty_api_key", (("A-Za-z0-9_\\-+", 20),), "https://support.pagerduty.com/main/docs/api-access-keys",
                keywords=('pagerduty',)),
    TokenFormat("opsgenie_api_key", UUID, "https://support.atlassian.com/opsgenie/docs/api-key-management/",
                keywords=('opsgenie',)),
    TokenFormat("snyk_api_token", UUID, "https://docs.snyk.io/snyk-api/authentication-for-api",
                keywords=('snyk',)),
    TokenFormat("codecov_token", UUID, "https://docs.codecov.com/docs/codecov-tokens",
                keywords=('codecov',)),
    TokenFormat("coveralls_repo_token", ((ALNUM, 32, 37),), "https://docs.coveralls.io/api-introduction",
                keywords=('coveralls',)),
    TokenFormat("travis_ci_token", ((B64URL, 22),), "https://docs.travis-ci.com/user/apiv3/#authentication",
                keywords=('travis',)),
    TokenFormat("circleci_legacy_token", ((HEX, 40),), "https://circleci.com/docs/managing-api-tokens/",
                keywords=('circleci', 'circle_token', 'circle-token')),
    TokenFormat("jenkins_api_token", ("11", (HEX, 32)), "https://www.jenkins.io/doc/book/using/remote-access-api/",
                keywords=('jenkins',)),
    TokenFormat("gitea_token", ((HEX, 40),), "https://docs.gitea.com/development/api-usage",
                keywords=('gitea', 'forgejo', 'codeberg')),
    TokenFormat("azure_devops_token", (("a-z2-7", 52),), "https://learn.microsoft.com/azure/devops/organizations/accounts/use-personal-access-tokens-to-authenticate",
                keywords=('azure_devops', 'azuredevops', 'azure-devops', 'ado_pat', 'devops_pat')),
    TokenFormat("azure_openai_key", ((HEX, 32),), "https://learn.microsoft.com/azure/ai-services/openai/reference",
                keywords=('azure_openai', 'azureopenai', 'azure-openai')),
    TokenFormat("github_oauth_client_secret", ((HEX, 40),), "https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps",
                keywords=('github_client_secret', 'githubclientsecret', 'github-client-secret', 'github_oauth')),
    TokenFormat("bitbucket_client_secret", ((B64URL, 32),), "https://developer.atlassian.com/cloud/bitbucket/oauth-2/",
                keywords=('bitbucket',)),
    TokenFormat("spotify_client_secret", ((HEX, 32),), "https://developer.spotify.com/documentation/web-api/concepts/apps",
                keywords=('spotify',)),
    TokenFormat("twitch_api_token", ((LOWER_ALNUM, 30),), "https://dev.twitch.tv/docs/authentication/",
                keywords=('twitch',)),
    TokenFormat("reddit_client_secret", ((B64URL, 27),), "https://github.com/reddit-archive/reddit/wiki/OAuth2",
                keywords=('reddit',)),
    TokenFormat("linkedin_client_secret", ((ALNUM, 16),), "https://learn.microsoft.com/linkedin/shared/authentication/client-credentials-flow",
                keywords=('linkedin',)),
    TokenFormat("steam_api_key", (("0-9A-F", 32),), "https://steamcommunity.com/dev",
                keywords=('steam',)),
    TokenFormat("discord_client_secret", ((B64URL, 32),), "https://discord.com/developers/docs/topics/oauth2",
                keywords=('discord',)),
    TokenFormat("dropbox_long_lived_token", ((ALNUM, 11), "AAAAAAAAAA", (B64URL, 43)), "https://developers.dropbox.com/oauth-guide",
                keywords=('dropbox',)),
    TokenFormat("zoom_client_secret", ((ALNUM, 32),), "https://developers.zoom.us/docs/integrations/oauth/",
                keywords=('zoom',)),
    TokenFormat("webflow_api_token", ((HEX, 64),), "https://developers.webflow.com/data/reference/authentication",
                keywords=('webflow',)),
    TokenFormat("etsy_api_key", ((LOWER_ALNUM, 24),), "https://developers.etsy.com/documentation/essentials/authentication",
                keywords=('etsy',)),
    TokenFormat("coinbase_api_secret", ((ALNUM, 32),), "https://docs.cdp.coinbase.com/",
                keywords=('coinbase',)),
    TokenFormat("kucoin_api_secret", UUID, "https://www.kucoin.com/docs/basic-info/connection-method/authentication/creating-a-request",
                keywords=('kucoin',)),
    TokenFormat("binance_api_secret", ((ALNUM, 64),), "https://developers.binance.com/docs/binance-spot-api-docs/rest-api/endpoint-security-type",
                keywords=('binance',)),
    TokenFormat("finnhub_api_key", ((LOWER_ALNUM, 20),), "https://finnhub.io/docs/api/authentication",
                keywords=('finnhub',)),
    TokenFormat("openweather_api_key", ((HEX, 32),), "https://openweathermap.org/appid",
                keywords=('openweather', 'owm_api')),
    TokenFormat("shodan_api_key", ((ALNUM, 32),), "https://developer.shodan.io/api/requirements",
                keywords=('shodan',)),
    TokenFormat("virustotal_api_key", ((HEX, 64),), "https://docs.virustotal.com/reference/authentication",
                keywords=('virustotal',)),
    TokenFormat("mongodb_atlas_private_key", UUID, "https://www.mongodb.com/docs/atlas/configure-api-access/",
                keywords=('mongodb_atlas', 'mongodbatlas', 'atlas_private', 'atlas_api')),
    TokenFormat("upstash_redis_token", ((B64URL, 40, 100),), "https://upstash.com/docs/redis/features/restapi",
                keywords=('upstash',)),
    TokenFormat("launchdarkly_access_token", ("api-", *UUID), "https://docs.launchdarkly.com/home/account/api",
                keywords=('launchdarkly',)),
    TokenFormat("segment_write_key", ((ALNUM, 32),), "https://segment.com/docs/connections/find-writekey/",
                keywords=('segment_write', 'segmentwrite', 'write_key', 'writekey')),
    TokenFormat("mixpanel_api_secret", ((HEX, 32),), "https://developer.mixpanel.com/reference/authentication",
                keywords=('mixpanel',)),
    TokenFormat("onelogin_client_secret", ((HEX, 64),), "https://developers.onelogin.com/api-docs/2/getting-started/working-with-api-credentials",
                keywords=('onelogin',)),
    TokenFormat("duo_secret_key", ((ALNUM, 40),), "https://duo.com/docs/adminapi#first-steps",
                keywords=('duo_secret', 'duo_skey', 'duo_api', 'duosecret')),
    TokenFormat("jumpcloud_api_key", ((HEX, 40),), "https://docs.jumpcloud.com/api/1.0/index.html#section/API-Key",
                keywords=('jumpcloud',)),
    TokenFormat("netlify_legacy_token", ((B64URL, 43),), "https://docs.netlify.com/api/get-started/#authentication",
                keywords=('netlify',)),
    TokenFormat("quay_robot_token", ((UPPER_ALNUM, 64),), "https://docs.quay.io/glossary/robot-accounts.html",
                keywords=('quay',)),
    TokenFormat("confluent_api_secret", ((B64, 64),), "https://docs.confluent.io/cloud/current/security/authenticate/workload-identities/service-accounts/api-keys/overview.html",
                keywords=('confluent',)),
    TokenFormat("paypal_client_secret", ((B64URL, 80),), "https://developer.paypal.com/api/rest/authentication/",
                keywords=('paypal',)),
    TokenFormat("razorpay_key_secret", ((ALNUM, 24),), "https://razorpay.com/docs/api/authentication/",
                keywords=('razorpay',)),
    TokenFormat("plaid_client_secret", ((HEX, 30),), "https://plaid.com/docs/api/#api-access",
                keywords=('plaid',)),
    TokenFormat("wise_api_token", UUID, "https://docs.wise.com/api-docs/features/authentication-access/personal-tokens",
                keywords=('transferwise', 'wise_api', 'wise_token')),
    TokenFormat("hubspot_legacy_api_key", UUID, "https://developers.hubspot.com/docs/api/migrate-an-api-key-integration-to-a-private-app",
                keywords=('hubspot',)),
    TokenFormat("squarespace_api_key", UUID, "https://developers.squarespace.com/commerce-apis/authentication-and-permissions",
                keywords=('squarespace',)),
    TokenFormat("ifttt_webhook_key", ((B64URL, 22),), "https://ifttt.com/maker_webhooks",
                keywords=('ifttt',)),
    TokenFormat("linear_client_secret", ((HEX, 32),), "https://linear.app/developers/oauth-2-0-authentication",
                keywords=('linear_client', 'linearclient')),
    TokenFormat("contentful_delivery_token", ((B64URL, 43),), "https://www.contentful.com/developers/docs/references/authentication/",
                keywords=('contentful',)),
    TokenFormat("sentry_legacy_token", ((HEX, 64),), "https://docs.sentry.io/account/auth-tokens/",
                keywords=('sentry',)),
    TokenFormat("newrelic_legacy_api_key", ((HEX, 47),), "https://docs.newrelic.com/docs/apis/intro-apis/new-relic-api-keys/",
                keywords=('newrelic', 'new_relic', 'new-relic')),
    TokenFormat("aws_session_token", ((B64, 100, 1200),), "https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_temp_use-resources.html",
                keywords=('aws_session_token', 'awssessiontoken', 'aws-session-token', 'x-amz-security-token')),
    # keys
    TokenFormat("age_secret_key", ("AGE-SECRET-KEY-1", ("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
                "https://age-encryption.org/v1"),
)  # fmt: skip
