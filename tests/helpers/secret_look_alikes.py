"""Look-alikes of secrets, generated from a seed: hashes, ids, checksums, test constants, paths, references,
placeholders, real code and config lines. Redaction must return each of them unchanged."""

from __future__ import annotations

import base64
import hashlib
import uuid

from helpers.secret_corpus import UPPER_ALNUM, Gen, LookAlike


def look_alikes(seed: int = 7) -> list[LookAlike]:
    g = Gen(seed)
    sha1, sha256 = hashlib.sha1(g.rng.randbytes(16)).hexdigest(), hashlib.sha256(g.rng.randbytes(16)).hexdigest()
    sha512 = base64.b64encode(hashlib.sha512(g.rng.randbytes(16)).digest()).decode()
    uid = str(uuid.UUID(int=g.rng.getrandbits(128)))
    text_b64 = base64.b64encode(b"hello world, this is test data for the decoder").decode()
    items = {
        "git_log": f"commit {sha1}\nAuthor: Dev <dev@example.com>\nDate:   Mon May 6 10:00:00 2024 +0200",
        "git_short_shas": f"{sha1[:7]} Fix off-by-one in pagination (#412)\nMerge: {sha1[:8]} {sha256[:12]}",
        "git_commit_env": f"GIT_COMMIT={sha1}",
        "uuid_request_id": f"request_id={uid} status=200",
        "uuid_env": f"CORRELATION_ID={uid}",
        "sha256sum_output": f"{sha256}  mtl_graph-0.1.0.tar.gz",
        "pip_hash": f"numpy==1.26.4 --hash=sha256:{sha256}",
        "docker_digest": f"docker pull python@sha256:{sha256}\nDigest: sha256:{sha256}",
        "package_lock_integrity": f'    "resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",\n    "integrity": "sha512-{sha512}",',
        "other_lockfiles": f"github.com/pkg/errors v0.9.1 h1:{g.b64(32)}\n"
                           f'{{file = "idna-3.7-py3-none-any.whl", hash = "sha256:{sha256}"}}\n"hashes": ["sha256:{sha256}"]',
        "data_uri_and_fingerprint": f'<img src="data:image/png;base64,{g.b64(60)}">\n256 SHA256:{g.b64(32)[:43]} dev@host (ED25519)',
        "yarn_lock_checksum": f'  version "4.17.21"\n  checksum: {hashlib.sha512(b"x").hexdigest()}',
        "base64_text_constant": f"assert base64.b64decode('{text_b64}') == EXPECTED",
        "base64_random_fixture": f"FIXTURE_PNG = '{g.b64(48)}'",
        "java_home": "JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64",
        "pwd_env": "PWD=/home/user/project\nOLDPWD=/home/user",
        "credentials_path": "GOOGLE_APPLICATION_CREDENTIALS=/var/secrets/google/key.json",
        "key_file_path": "ssl_key_file = /etc/ssl/private/server.key",
        "camel_case_identifiers": "AbstractSingletonProxyFactoryBeanDefinitionRegistryPostProcessorTokenSecret = APEXTokenValidatorFactoryImpl()",
        "test_code_placeholders": "user = User(username='bob', password='hashed')\nassert check(password='secret')\nlogin(token='xxx')",
        "changeme_default": 'DEFAULT_PASSWORD = "changeme"',
        "getenv_reference": "password = os.getenv('DB_PASSWORD')\napi_key = os.environ[\"API_KEY\"]\ntoken = settings.GITHUB_TOKEN",
        "shell_references": "export API_KEY=$API_KEY\nPASSWORD=${DB_PASSWORD}\ncurl -H \"Authorization: Bearer $TOKEN\" https://x",
        "ci_template": "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\npassword: \"{{ .Values.db.password }}\"",
        "placeholder_angle": "PASSWORD=<your password here>\napi_key: <YOUR_API_KEY>",
        "urls_without_credentials": "git clone https://github.com/acme/app.git\nssh://git@github.com:22/acme/app.git\nhttp://localhost:8080/api?page=2",
        "package_versions": "Successfully installed numpy-1.26.4 scikit-learn-1.4.0 requests-2.31.0\nVERSION=1.2.3-rc.1",
        "config_names_not_secrets": "MAX_TOKENS=4096\nSECRET_KEY_LENGTH=50\ntoken_type: bearer\nPYTHONHASHSEED=0",
        "type_hints": "def check_password(password: str) -> bool:\n    token: Optional[str] = None",
        "password_file_flags": "--password-file /run/secrets/db\necho $PW | docker login -u ci --password-stdin",
        "p_flags_not_passwords": "mkdir -p /tmp/build && docker run -p 8080:80 nginx && ssh -p 2222 host\nmysql -h db -u root -p",
        "k8s_secret_ref": "valueFrom:\n  secretKeyRef:\n    name: db-credentials\n    key: password",
        "english_bearer_basic": "The bearer of this letter is trusted.\nBasic troubleshooting steps follow.",
        "jwt_header_only": "eyJhbGciOiJIUzI1NiJ9 is only a header",
        "aws_prefix_prose": "AKIA is the prefix of AWS access key ids; arn:aws:iam::123456789012:role/Deploy",
        "sk_prose": "sk-learn is not a package name; use scikit-learn",
        "pod_hostname": "HOSTNAME=runner-5f7c9d8b6-x2x7q",
        "public_key": f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ{g.b64(60)} dev@laptop",
        "certificate": "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n-----END CERTIFICATE-----",
        "traceback": 'Traceback (most recent call last):\n  File "/app/tokenizer.py", line 42, in refresh_token\n    raise KeyError(key)\nKeyError: \'access_token\'',
        "pytest_ids": "tests/test_tokenizer.py::test_token_refresh PASSED\ntests/test_auth.py::test_password_reset[case-3] FAILED",
        "print_password_label": 'print("password:", pw, "rotated")',
        "memory_address": "<Session object at 0x7ffd5fbff8c0> token=None",
        "docstring_args": "    Args:\n        token: The new token, or a list of content blocks.\n        api_key: Key used to authenticate.",
        "python_parameters": "def on_llm_new_token(\n    token: str | list[str | dict[str, Any]],\n    api_key: SecretStr,\n):",
        "python_variables": "token = await token\nclient = Client(api_key=credential,\n    secret=match,\n)\n_DHPrivateKey = DHPrivateKey",
        "pem_marker_constants": '_SK_START = b"-----BEGIN OPENSSH PRIVATE KEY-----"\n_SK_END = b"-----END OPENSSH PRIVATE KEY-----"',
        "system_config": "Alias=dbus-org.freedesktop.timesync1.service\npasswd:         files systemd\n"
                         "#jdk.security.krb5.default.initiate.credential=always-impersonate",
        "numeric_settings": "summarize(model, chars_per_token=3.3, max_tokens=4096)",
        "header_from_variable": "headers = {'x-amz-date': timestamp, 'Authorization': v4auth_header}",
    }
    items.update(_new_class_look_alikes(g, sha1, sha256))
    return [LookAlike(k, v) for k, v in items.items()]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _new_class_look_alikes(g: Gen, sha1: str, sha256: str) -> dict[str, str]:
    """What the encoded, URL-user, webhook, query, positional and .pgpass rules must leave alone."""
    cert = _b64("-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
                "-----END CERTIFICATE-----\n")
    config = _b64("replicas: 3\nimage: nginx:1.25\nport: 8080\n")
    binary = base64.b64encode(g.rng.randbytes(48)).decode()
    return {
        "build_serial_with_akia": f"flashing image build {g.digits(6)}AKIA{g.chars(UPPER_ALNUM, 16)} to device 3",
        "k8s_configmap_like_data": f"kind: Secret\ndata:\n  LOG_LEVEL: aW5mbw==\n  config.yaml: {config}\n"
                                   f"  ca.der: {binary}\n",
        "kubeconfig_certificates": f"clusters:\n- cluster:\n    certificate-authority-data: {cert}\n"
                                   f"    server: https://10.0.0.1:6443\n  name: prod\nusers:\n- name: dev\n  user:\n"
                                   f"    client-certificate-data: {cert}\n",
        "url_users_not_tokens": "git clone ssh://git@github.com/acme/app.git\nhttps://jdoe42@bitbucket.org/team/repo.git\n"
                                "ftp://anonymous@ftp.example.org/pub\npostgres://postgres@localhost/app\n"
                                "https://first-name-last-name-2024@dev.azure.com/org/proj/_git/repo",
        "hex_values_of_other_names": f"GIT_SHA256={sha256}\nCACHE_KEY_BASE={sha1}\nbuild_hash: {sha256}\n"
                                     "SECRET_KEY_BASE_LENGTH=128\nTOKEN_VALUE_MAX=64",
        "webhook_docs_and_settings": "see https://docs.github.com/en/webhooks/about-webhooks and "
                                     "https://github.com/acme/app/settings/hooks\n"
                                     "GET https://api.github.com/repos/acme/app/hooks/12345678 200\n"
                                     "cp scripts/pre-commit .git/hooks/pre-commit && https://git-scm.com/docs/githooks",
        "query_strings_without_credentials": "GET /items?sort=key&page=2\nhttps://example.com/?key=value\n"
                                             "https://maps.example.com/embed?key=YOUR_API_KEY\n"
                                             "GET /cache?cache_key=build-2024-05-01&sig=none 304\n"
                                             "https://search.example.com/?q=signature+verification&keyword=python3",
        "calls_without_password_literals": 'sqlite3.connect("app.db")\nsock.connect(("10.0.0.1", 80))\n'
                                           "conn = psycopg2.connect(dsn)\nserver.login(user, password)\n"
                                           "client.connect(hostname, port=22, username=user)\nftp.login()\n"
                                           'pymysql.connect("db", "app", os.environ["DB_PASSWORD"], "shop")\n'
                                           'r = redis.Redis("cache", 6379, 0)\nuser.set_password(raw_password)\n'
                                           "def connect(host, user, password):",
        "colon_lines_not_pgpass": "root:x:0:0:root:/root:/bin/bash\nnotes.txt:3:todo:fix:later\n"
                                  "GET user:1234:session:abc:def\nether 00:1a:2b:3c:4d:5e\n"
                                  "src/app.py:12:5: E501 line too long\nlocalhost:5432:*:*:*",
    }
