"""A corpus of realistic secrets and look-alikes, generated from a seed (no literal secret is ever committed).

Every secret is built from random characters of its real alphabet, length, prefix and structure, and placed in the
file format it is found in (env files, YAML, INI, JSON, .npmrc, .pypirc, DSNs, HTTP headers, command lines, code,
logs). Look-alikes are what must survive: hashes, ids, checksums, test constants, paths, references, placeholders.
Used by tests/redaction/test_redaction.py and benchmarks/redaction.py; the look-alikes are in
tests/helpers/secret_look_alikes.py, the base64-hidden and by-position classes in
tests/helpers/secret_corpus_located.py.
"""

from __future__ import annotations

import base64
import random
import string
import uuid
from dataclasses import dataclass

B62 = string.ascii_letters + string.digits
URLSAFE = B62 + "-_"
B64 = B62 + "+/"
HEX = "0123456789abcdef"
UPPER_ALNUM = string.ascii_uppercase + string.digits
PASSWORD_CHARS = B62 + "!#%+-.@^_~"


@dataclass(frozen=True)
class SecretCase:
    """A text holding secrets: each listed secret must vanish and nothing else may change."""

    id: str
    text: str
    secrets: tuple[str, ...]
    kind: str


@dataclass(frozen=True)
class LookAlike:
    """A text with nothing secret in it: redaction must return it unchanged."""

    id: str
    text: str


class Gen:
    """Random strings of a given alphabet; mixed alphabets always contain a digit, an upper and a lower letter."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chars(self, alphabet: str, n: int) -> str:
        while True:
            s = "".join(self.rng.choice(alphabet) for _ in range(n))
            needs = [set(c) & set(alphabet) for c in (string.digits, string.ascii_lowercase, string.ascii_uppercase)]
            if all(not need or set(s) & need for need in needs) or n < 6:
                return s

    def b62(self, n: int) -> str:
        return self.chars(B62, n)

    def hex(self, n: int) -> str:
        return self.chars(HEX, n)

    def b64(self, nbytes: int) -> str:
        while True:
            s = base64.b64encode(self.rng.randbytes(nbytes)).decode()
            if any(c.isdigit() for c in s):
                return s

    def b64url(self, nbytes: int) -> str:
        return base64.urlsafe_b64encode(self.rng.randbytes(nbytes)).decode().rstrip("=")

    def password(self, n: int = 16, alphabet: str = PASSWORD_CHARS) -> str:
        """Starts with a letter (a leading `$`, `<` or `-` reads as a reference, a placeholder or a flag)."""
        return (self.rng.choice(string.ascii_letters) + self.chars(alphabet, n - 3) + self.rng.choice(string.digits)
                + self.rng.choice("!~_"))

    def url_password(self, n: int = 16) -> str:
        """A password as it appears in a URL (`@`, `#`, `/` and `?` would have to be percent-encoded)."""
        return self.password(n, B62 + "-._~!")

    def digits(self, n: int) -> str:
        return str(self.rng.randint(10 ** (n - 1), 10**n - 1))

    def jwt(self) -> str:
        header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
        claims = f'{{"sub":"{self.digits(8)}","name":"svc-{self.b62(6)}","iat":{self.digits(10)}}}'
        payload = base64.urlsafe_b64encode(claims.encode()).decode().rstrip("=")
        return f"{header}.{payload}.{self.b64url(32)}"

    def pem(self, label: str, nbytes: int = 600) -> tuple[str, str]:
        """(the whole block, the body that must vanish)."""
        raw = base64.b64encode(self.rng.randbytes(nbytes)).decode()
        body = "\n".join(raw[i:i + 64] for i in range(0, len(raw), 64))
        return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body


def secret_cases(seed: int = 7) -> list[SecretCase]:
    g = Gen(seed)
    cases: list[SecretCase] = []

    def add(id_: str, kind: str, text: str, *secrets: str) -> None:
        cases.append(SecretCase(id_, text, secrets, kind))

    pw = g.password

    # --- vendor tokens in their usual homes -------------------------------------------------------------------
    s = f"sk-proj-{g.chars(URLSAFE, 74)}T3BlbkFJ{g.chars(URLSAFE, 74)}"
    add("openai_project_env", "openai_key", f"OPENAI_API_KEY={s}\nOPENAI_ORG=org-research\n", s)
    s = f"sk-{g.b62(20)}T3BlbkFJ{g.b62(20)}"
    add("openai_legacy_python", "openai_key", f'openai.api_key = "{s}"\n', s)
    s = f"sk-ant-api03-{g.chars(URLSAFE, 93)}AA"
    add("anthropic_env", "anthropic_key", f"export ANTHROPIC_API_KEY={s}", s)
    s = f"sk-ant-api03-{g.chars(URLSAFE, 93)}AA"
    add("anthropic_error_log", "anthropic_key",
        f"anthropic.AuthenticationError: Error code: 401 - invalid x-api-key {s} (request req_{g.b62(12)})", s)
    s = f"sk_live_{g.b62(99)}"
    add("stripe_dotenv", "stripe", f"# payments\nSTRIPE_SECRET_KEY={s}\nSTRIPE_CURRENCY=eur\n", s)
    s = f"rk_live_{g.b62(24)}"
    add("stripe_restricted_log", "stripe", f"INFO payouts: using restricted key {s} for account acct_1", s)
    s = f"sk_test_{g.b62(24)}"
    add("stripe_js", "stripe", f"const stripe = require('stripe')('{s}');", s)
    s = f"ghp_{g.b62(36)}"
    add("github_clone_url", "github_token", f"$ git clone https://{s}@github.com/acme/payments.git\nCloning into 'payments'...", s)
    s = f"github_pat_{g.b62(22)}_{g.b62(59)}"
    add("github_fine_grained_env", "github_token", f"GITHUB_TOKEN={s}", s)
    s = f"gho_{g.b62(36)}"
    add("github_oauth_json", "github_token", f'{{"access_token": "{s}", "token_type": "bearer", "scope": "repo"}}', s)
    s = f"glpat-{g.chars(URLSAFE, 20)}"
    add("gitlab_remote", "gitlab_token", f"git remote set-url origin https://oauth2:{s}@gitlab.com/group/app.git", s)
    s = f"xoxb-{g.digits(12)}-{g.digits(13)}-{g.b62(24)}"
    add("slack_yaml", "slack_token", f"notifications:\n  slack_token: {s}\n  channel: '#deploys'\n", s)
    hook = f"https://hooks.slack.com/services/T{g.chars(UPPER_ALNUM, 8)}/B{g.chars(UPPER_ALNUM, 10)}/{g.b62(24)}"
    add("slack_webhook_curl", "slack_token", f"curl -X POST -H 'Content-type: application/json' --data '{{\"text\":\"ok\"}}' {hook}", hook)
    s = f"npm_{g.b62(36)}"
    add("npmrc_token", "npm_token", f"registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken={s}\n", s)
    s = str(uuid.UUID(int=g.rng.getrandbits(128)))
    add("npmrc_legacy_uuid_token", "npm_token", f"//npm.pkg.github.com/:_authToken={s}\nalways-auth=true", s)
    s = base64.b64encode(f"deploy:{pw()}".encode()).decode()
    add("npmrc_auth_basic", "secret", f"_auth={s}\nemail=ci@example.com", s)
    s = f"pypi-AgEIcHlwaS5vcmc{g.chars(URLSAFE, 150)}"
    add("pypirc", "pypi_token", f"[distutils]\nindex-servers = pypi\n\n[pypi]\nusername = __token__\npassword = {s}\n", s)
    s = f"pypi-AgEIcHlwaS5vcmc{g.chars(URLSAFE, 120)}"
    add("twine_command", "pypi_token", f"twine upload -u __token__ -p {s} dist/*", s)
    s = f"SG.{g.chars(URLSAFE, 22)}.{g.chars(URLSAFE, 43)}"
    add("sendgrid_python", "sendgrid", f"sg = SendGridAPIClient('{s}')\nresponse = sg.send(message)", s)
    s = g.jwt()
    add("jwt_bearer_header", "jwt", f"> GET /v1/me HTTP/1.1\n> Host: api.example.com\n> Authorization: Bearer {s}\n> Accept: */*", s)
    s = f"hf_{g.chars(string.ascii_letters, 34)}"
    add("huggingface_cli", "huggingface_token", f"huggingface-cli login --token {s} --add-to-git-credential", s)
    s = f"hf_{g.chars(string.ascii_letters, 34)}"
    add("huggingface_python", "huggingface_token", f'from huggingface_hub import login\nlogin(token="{s}")', s)
    s = f"AIza{g.chars(URLSAFE, 35)}"
    add("google_key_in_url", "google_api_key", f"GET https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={s} 200", s)
    s = f"ya29.a0{g.chars(URLSAFE, 120)}"
    add("google_oauth_bearer", "google_oauth", f"curl -H \"Authorization: Bearer {s}\" https://www.googleapis.com/drive/v3/files", s)
    s = f"GOCSPX-{g.chars(URLSAFE, 28)}"
    add("google_client_secret_json", "google_oauth",
        f'{{"installed": {{"client_id": "{g.digits(12)}-abc.apps.googleusercontent.com", "client_secret": "{s}"}}}}', s)
    s = f"{g.rng.choice('MNO')}{g.chars(URLSAFE, 23)}.{g.chars(URLSAFE, 6)}.{g.chars(URLSAFE, 27)}"
    add("discord_bot_python", "discord_bot_token", f"client.run('{s}')", s)
    s = f"{g.digits(10)}:{g.chars(URLSAFE, 35)}"
    add("telegram_bot_url", "telegram_bot_token", f"requests.post(f'https://api.telegram.org/bot{s}/sendMessage', json=msg)", s)
    s = f"SK{g.hex(32)}"
    add("twilio_key_log", "twilio", f"twilio: authenticated with api key {s} for account", s)
    s = f"{g.hex(32)}-us14"
    add("mailchimp_key", "mailchimp", f"client.set_config({{'server': 'us14'}})  # key {s}", s)
    s = f"sq0csp-{g.chars(URLSAFE, 43)}"
    add("square_oauth_secret", "square", f"SQUARE_APPLICATION_SECRET: {s}", s)
    s = f"AKCp8{g.b62(68)}"
    add("artifactory_header", "artifactory_credentials", f'curl -H "X-JFrog-Art-Api: {s}" https://repo.example.com/api/storage', s)
    s = f"dop_v1_{g.hex(64)}"
    add("digitalocean_cli", "digitalocean_token", f"doctl auth init -t {s}", s)
    s = g.hex(32)
    add("sentry_dsn", "sentry_dsn", f"SENTRY_DSN=https://{s}@o{g.digits(6)}.ingest.sentry.io/{g.digits(7)}", s)

    s = f"sk-or-v1-{g.hex(64)}"
    add("openrouter_env", "openrouter_key", f"OPENROUTER_KEY={s}", s)
    s = f"gsk_{g.b62(52)}"
    add("groq_python", "groq_key", f"client = Groq(api_key=os.environ.get('GROQ', '{s}'))", s)
    s = f"r8_{g.b62(37)}"
    add("replicate_export", "replicate_token", f"export REPLICATE_API_TOKEN={s}", s)
    s = f"xai-{g.b62(80)}"
    add("xai_header", "xai_key", f"curl https://api.x.ai/v1/models -H 'Authorization: Bearer {s}'", s)
    s = f"hvs.{g.chars(URLSAFE, 92)}"
    add("vault_token", "vault_token", f"$ vault login {s}\nSuccess! You are now authenticated.", s)
    s = f"ATATT3xFfGF0{g.chars(URLSAFE + '=', 180)}"
    add("atlassian_token", "atlassian_token", f"JIRA_API_TOKEN: {s}", s)
    s = f"PMAK-{g.hex(24)}-{g.hex(34)}"
    add("postman_key", "postman_key", f"newman run collection.json --postman-api-key {s}", s)
    s = f"glsa_{g.b62(32)}_{g.hex(8)}"
    add("grafana_token", "grafana_token", f"grafana:\n  token: {s}", s)
    s = f"NRAK-{g.chars(UPPER_ALNUM, 27)}"
    add("newrelic_key", "newrelic_key", f"2024-05-01 INFO newrelic: using key {s}", s)
    s = f"dp.st.{g.b62(43)}"
    add("doppler_token", "doppler_token", f"doppler run --token {s} -- ./start.sh", s)
    s = f"sbp_{g.hex(40)}"
    add("supabase_token", "supabase_token", f"supabase login --token {s}", s)
    s = f"AGE-SECRET-KEY-1{g.chars(UPPER_ALNUM, 58)}"
    add("age_key_file", "age_secret_key", f"# created: 2024-05-01T10:00:00Z\n# public key: age1{g.hex(20)}\n{s}\n", s)

    s = g.chars(URLSAFE, 44)
    add("ibm_cloud_iam", "api_key", f'ibm_cloud_iam_api_key = "{s}"', s)
    s = g.hex(64)
    add("cloudant_url", "cloudant_credentials", f"COUCH_URL=https://acme-admin:{s}@acme-admin.cloudant.com/orders", s)
    s = g.hex(64)
    add("softlayer_key", "api_key", f"softlayer:\n  api_key: {s}", s)
    # --- cloud credentials --------------------------------------------------------------------------------------
    key_id, secret = f"AKIA{g.chars(UPPER_ALNUM, 16)}", g.chars(B64, 40)
    add("aws_credentials_ini", "aws_access_key",
        f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\nregion = eu-west-1\n", key_id, secret)
    s = g.chars(B64, 40)
    add("aws_secret_export", "aws_access_key", f'export AWS_SECRET_ACCESS_KEY="{s}"', s)
    s = "IQoJb3JpZ2luX2VjE" + g.chars(B64, 300)
    add("aws_session_token_ini", "token", f"[temp]\naws_session_token = {s}\n", s)
    s = g.b64(64)
    add("azure_connection_string", "azure_storage_key",
        f"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acmedata;AccountKey={s};EndpointSuffix=core.windows.net", s)
    s = g.b64(32)
    add("azure_service_bus", "secret",
        f'"ServiceBus": "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={s}"', s)
    block, body = g.pem("RSA PRIVATE KEY", 900)
    add("pem_rsa_terminal", "private_key", f"$ cat ~/.ssh/id_rsa\n{block}\n$ ls -la ~/.ssh", body)
    block, body = g.pem("OPENSSH PRIVATE KEY", 400)
    add("pem_openssh", "private_key", block, body)
    block, body = g.pem("PRIVATE KEY", 1200)
    escaped = block.replace("\n", "\\n")
    add("pem_in_service_account_json", "private_key",
        f'{{"type": "service_account", "project_id": "acme-prod", "private_key": "{escaped}\\n", "client_email": "ci@acme-prod.iam.gserviceaccount.com"}}',
        body.replace("\n", "\\n"))
    block, body = g.pem("EC PRIVATE KEY", 120)
    cut = block[: len(block) // 2].rstrip()
    add("pem_cut_observation", "private_key", f"<output_head>\n{cut}\n</output_head>\n$ ls", cut.split("-----\n", 1)[1])
    block, body = g.pem("RSA PRIVATE KEY", 300)
    block = block.replace("-----\n", "-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,"
                          f"{g.hex(32).upper()}\n\n", 1)
    add("pem_encrypted_headers", "private_key", block, block.split("-----\n", 1)[1].rsplit("\n-----END", 1)[0])

    # --- config syntaxes ----------------------------------------------------------------------------------------
    s = pw()
    add("compose_yaml", "password", f"services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: {s}\n      POSTGRES_DB: app\n", s)
    s = pw()
    add("k8s_env_list", "password", f"env:\n  - name: DB_PASSWORD\n    value: \"{s}\"\n  - name: DB_HOST\n    value: db", s)
    s = pw(20)
    add("ini_section", "password", f"[database]\nhost = db.internal\nuser = app\npassword = {s}\n", s)
    s = pw()
    add("json_credentials", "password", f'{{"username": "svc-backup", "password": "{s}", "retries": 3}}', s)
    s = g.b62(40)
    add("json_client_secret", "secret", f'  "client_secret": "{s}",', s)
    s = pw()
    add("properties_file", "password", f"spring.datasource.url=jdbc:postgresql://db:5432/app\nspring.datasource.password={s}", s)
    s = pw()
    add("tfvars", "password", f'db_password = "{s}"\ninstance_type = "t3.micro"', s)
    s = g.b62(50)
    add("dotenv_django_secret", "secret", f"DEBUG=false\nDJANGO_SECRET_KEY='{s}'\n", s)
    s = base64.b64encode(f"ci-bot:{pw()}".encode()).decode()
    add("docker_config_json", "secret", f'{{"auths": {{"registry.example.com": {{"auth": "{s}"}}}}}}', s)
    s = pw()
    add("toml_token", "token", f'[tool.poetry.http-basic.internal]\nusername = "ci"\napi_token = "{s}"', s)

    s = pw()
    add("netrc", "password", f"machine api.example.com login deploy password {s}\nmachine github.com", s)
    s = pw()
    add("netrc_multiline", "password", f"machine git.example.com\n  login ci\n  password {s}\n", s)
    s = pw()
    add("redis_conf", "password", f"bind 127.0.0.1\nrequirepass {s}\nmaxmemory 2gb", s)
    s = base64.b64encode(pw().encode()).decode()
    add("k8s_secret_data", "password",
        f"apiVersion: v1\nkind: Secret\ndata:\n  username: YWRtaW4=\n  password: {s}\n", s)
    s = base64.b64encode(f'{{"auths":{{"r.io":{{"auth":"{g.b64(18)}"}}}}}}'.encode()).decode()
    add("k8s_dockerconfigjson", "secret", f"type: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {s}", s)
    s = pw()
    add("java_system_property", "password", f"java -Djavax.net.ssl.keyStorePassword={s} -jar app.jar", s)
    s = pw()
    add("odbc_connection_string", "password",
        f'"Server=tcp:db.example.com,1433;Database=shop;User Id=sa;Password={s};Encrypt=True;"', s)
    s = pw()
    add("escaped_json_in_json", "password", f'{{"body": "{{\\"user\\": \\"bob\\", \\"password\\": \\"{s}\\"}}"}}', s)
    s = pw()
    add("python_dict_repr", "password", f"DEBUG connect kwargs: {{'host': 'db', 'password': '{s}', 'port': 5432}}", s)
    s = f"ghs_{g.b62(36)}"
    add("git_credentials_file", "github_token", f"https://x-access-token:{s}@github.com\n", s)
    s = pw()
    add("pgpassword_prefix", "password", f"$ PGPASSWORD={s} psql -h db -U app -c 'select 1'", s)
    lines = "\n".join(g.b64(48) for _ in range(4))
    add("putty_key_file", "private_key",
        f"PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: deploy\nPublic-Lines: 2\n{g.b64(48)}\n{g.b64(20)}\n"
        f"Private-Lines: 4\n{lines}\nPrivate-MAC: {g.hex(64)}", lines)

    # --- DSNs and URLs ------------------------------------------------------------------------------------------
    s = pw()
    add("libpq_dsn", "password", f'psql "host=db.internal port=5432 user=app password={s} dbname=prod sslmode=require"', s)
    s = g.url_password()
    add("postgres_url", "url_credentials", f"DATABASE_URL=postgresql://app:{s}@db.internal:5432/prod", s)
    s = g.url_password()
    add("mongodb_srv_url", "url_credentials", f"client = MongoClient('mongodb+srv://reporting:{s}@cluster0.ab1cd.mongodb.net/?retryWrites=true')", s)
    s = g.url_password()
    add("redis_url_no_user", "url_credentials", f"CELERY_BROKER_URL=redis://:{s}@cache:6379/0", s)
    s = pw()
    add("jdbc_query_password", "password", f"jdbc:mysql://db:3306/shop?user=shop&password={s}&useSSL=true", s)

    # --- HTTP ---------------------------------------------------------------------------------------------------
    s = base64.b64encode(f"admin:{pw()}".encode()).decode()
    add("basic_auth_header", "basic_auth", f"Authorization: Basic {s}\nUser-Agent: curl/8.5.0", s)
    s = g.b62(32)
    add("x_api_key_curl", "api_key", f"curl -s -H 'X-Api-Key: {s}' https://api.example.com/v2/items", s)
    s = g.hex(32)
    add("x_auth_token_header", "token", f"X-Auth-Token: {s}\r\nContent-Length: 0\r\n", s)
    a, b = g.b62(32), g.b62(32)
    add("cookie_header", "cookie", f"Cookie: sessionid={a}; csrftoken={b}; theme=dark", a, b)
    s = g.b62(40)
    add("set_cookie", "cookie", f"< Set-Cookie: session={s}; Path=/; HttpOnly; Secure", s)
    s = g.b62(40)
    add("requests_headers_dict", "api_key", f'resp = requests.get(url, headers={{"X-Api-Key": "{s}"}})', s)

    # --- command lines -----------------------------------------------------------------------------------------
    s = pw()
    add("mysql_attached_p", "password", f"$ mysql -h db -u root -p{s} shop < dump.sql", s)
    s = pw()
    add("mysqldump_attached_p", "password", f"mysqldump --single-transaction -uroot -p'{s}' shop > shop.sql", s)
    s = pw()
    add("docker_login_p", "password", f"docker login -u ci-bot -p {s} registry.example.com", s)
    s = pw()
    add("password_flag_space", "password", f"mongodump --username backup --password {s} --out /backup", s)
    s = pw()
    add("password_flag_equals", "password", f"pg_dump --dbname=app --password={s}", s)
    s = g.b64(48)
    add("token_flag", "token", f"cloudflared tunnel run --token {s}", s)
    s = pw()
    add("sshpass", "password", f"sshpass -p '{s}' ssh deploy@10.0.0.5 'systemctl restart app'", s)
    s = g.url_password()
    add("curl_user", "url_credentials", f"curl -u admin:{s} https://jenkins.example.com/api/json", s)
    s = f"{g.b62(5)} horse battery {g.b62(5)}"
    add("sshpass_quoted_phrase", "password", f"sshpass -p '{s}' scp backup.tar deploy@host:/srv", s)
    s = f"{g.b62(5)} horse battery {g.b62(5)}"
    add("password_flag_quoted_phrase", "password", f'mongosh --username admin --password "{s}" --quiet', s)
    s = pw()
    add("redis_cli_a", "password", f"redis-cli -h cache -a {s} ping", s)

    # --- code and logs -----------------------------------------------------------------------------------------
    s = pw()
    add("python_kwarg", "password", f'conn = psycopg2.connect(host="db", user="app", password="{s}")', s)
    s = g.b62(32)
    add("js_const", "api_key", f'const apiKey = "{s}";\nfetch(url, {{ headers: {{ "x-api-key": apiKey }} }});', s)
    s = g.b62(24)
    add("log_line_assignment", "api_key", f"2024-05-01 12:00:01,233 DEBUG client: request with api_key={s} took 231ms", s)
    s = g.b64(30)
    add("env_dump_high_entropy", "high_entropy", f"$ env\nHOME=/root\nLEGACY_HMAC={s}\nPATH=/usr/bin:/bin", s)
    s = f"correct horse {g.b62(6)} staple"
    add("quoted_passphrase", "password", f'keyring.set_password("db", "app", password="{s}")', s)
    s = pw()
    add("password_comparison", "password", f'if password == "{s}":\n    grant()', s)
    from helpers.secret_corpus_located import add_encoded_and_located  # it builds on Gen: imported here, not at the top

    add_encoded_and_located(g, add)
    return cases
