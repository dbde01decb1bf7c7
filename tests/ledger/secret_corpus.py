"""Realistically shaped fake secrets, as agents leak them: (name, text, secret).

Every text is ``BEFORE <the leak> AFTER``: the secret must go, the words around it must stay.
"""

BEFORE, AFTER = "step 3 of the deploy:", "then the smoke tests ran."

_LEAKS = [
    ("aws_access_key_id", "aws access key AKIAIOSFODNN7EXAMPL3 in use", "AKIAIOSFODNN7EXAMPL3"),
    (
        "aws_secret_free_text",
        "the aws secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEK3Y for prod",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEK3Y",
    ),
    (
        "aws_secret_env",
        "export AWS_SECRET_ACCESS_KEY=Zk3+Qp9/LmNoPqRsTuVwXyZaBcDeFgHiJkLmN0pq",
        "Zk3+Qp9/LmNoPqRsTuVwXyZaBcDeFgHiJkLmN0pq",
    ),
    (
        "github_classic",
        "git push https://ghp_R4nd0mT0k3nV4lu3sAbCdEfGhIjKlMnOp12@github.com/o/r",
        "ghp_R4nd0mT0k3nV4lu3sAbCdEfGhIjKlMnOp12",
    ),
    (
        "github_fine_grained",
        "GH token github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789abcdefABCDEFGHIJ used",
        "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789abcdefABCDEFGHIJ",
    ),
    ("gitlab_pat", "gitlab says glpat-x9Yz8WvU7tS6rQ5pO4nM ok", "glpat-x9Yz8WvU7tS6rQ5pO4nM"),
    (
        "slack_bot",
        "slack xoxb-1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx posted",
        "xoxb-1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    (
        "slack_webhook",
        "POST https://hooks.slack.com/services/T0123ABCD/B0456EFGH/aBcDeFgHiJkLmNoPqRsTuVwX done",
        "aBcDeFgHiJkLmNoPqRsTuVwX",
    ),
    ("stripe_live", "charge with sk_live_51HxYzAbCdEfGhIjKlMnOpQrSt00 failed", "sk_live_51HxYzAbCdEfGhIjKlMnOpQrSt00"),
    ("stripe_restricted", "rk_test_4eC39HqLyjWDarjtT1zdp7dc in the fixture", "rk_test_4eC39HqLyjWDarjtT1zdp7dc"),
    (
        "openai",
        "OPENAI key sk-proj-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6 loaded",
        "sk-proj-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6",
    ),
    (
        "anthropic",
        "client = Anthropic(api_key='sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe-AbCdEfGh')",
        "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe-AbCdEfGh",
    ),
    ("google_api_key", "maps AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI works", "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI"),
    (
        "google_oauth",
        "access ya29.a0AfH6SMBx7Kq2Lm9Np4Rs8Tv3Wx6Yz1Bc5De0Fg returned",
        "ya29.a0AfH6SMBx7Kq2Lm9Np4Rs8Tv3Wx6Yz1Bc5De0Fg",
    ),
    (
        "jwt",
        "cookie jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U set",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    (
        "bearer_header",
        "curl -H 'Authorization: Bearer 8f3k2j1h0g9f8e7d6c5b4a' https://api.x.io",
        "8f3k2j1h0g9f8e7d6c5b4a",
    ),
    ("basic_header", "sent Authorization: Basic YWRtaW46c3VwZXJzZWNyZXQ= upstream", "YWRtaW46c3VwZXJzZWNyZXQ="),
    (
        "pem_rsa",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq9Xv1Yz2Wx3Vu4Ts5Rq6Po7Nm8Lk9Ji0Hg\n-----END RSA PRIVATE KEY-----\n",
        "MIIEpAIBAAKCAQEA7bq9Xv1Yz2Wx3Vu4Ts5Rq6Po7Nm8Lk9Ji0Hg",
    ),
    (
        "pem_openssh",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
    ("mysql_p", "mysql -h db.internal -u app -pTr0ub4dor3xyz shop < dump.sql", "Tr0ub4dor3xyz"),
    ("curl_u", "curl -u deploy:Hx7pQ2mZ9vLw https://ci.example.com/job", "Hx7pQ2mZ9vLw"),
    ("password_flag", "pg_dump --password=Qw3rTy9UiOp db", "Qw3rTy9UiOp"),
    ("password_flag_spaced", "rabbitmqctl add_user bob --password Zx8Cv7Bn6Mq", "Zx8Cv7Bn6Mq"),
    ("password_query", "GET https://api.example.com/login?user=bob&password=S3cr3tPa55&next=/ 200", "S3cr3tPa55"),
    ("env_token", "DEPLOY_TOKEN=9c8b7a6f5e4d3c2b1a0f and GO", "9c8b7a6f5e4d3c2b1a0f"),
    ("postgres_url", "DATABASE_URL is postgres://app:Pg5ecretVal@db:5432/app now", "Pg5ecretVal"),
    ("redis_url", "broker redis://:R3disPa55w0rd@cache:6379/0 up", "R3disPa55w0rd"),
    ("amqp_url", "amqp://guest:Gu3stPa55@rabbit:5672/vhost connected", "Gu3stPa55"),
    ("ftp_url", "fetched ftp://anon:Ftp5ecret99@files.example.org/pub/x.tgz", "Ftp5ecret99"),
    ("mongodb_srv_url", "mongodb+srv://admin:M0ng0Pa55xyz@cluster0.abcde.mongodb.net/db", "M0ng0Pa55xyz"),
    ("https_userinfo", "pip install git+https://builder:Bu1ldT0k3n77@git.example.com/lib.git", "Bu1ldT0k3n77"),
    (
        "switchyard_key",
        "SWITCHYARD_KEY sy_0a1b2c3d_Q2hlY2tUaGlzT3V0VGhpc0lzQUZha2VLZXkxMjM in env",
        "Q2hlY2tUaGlzT3V0VGhpc0lzQUZha2VLZXkxMjM",
    ),
    (
        "npm_token",
        "//registry.npmjs.org/:_authToken=npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    ),
    ("huggingface", "login with hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 done", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
    (
        "sendgrid",
        "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 sent",
        "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",
    ),
    ("sshpass", "sshpass -p 'Ssh9Pa55wd' ssh deploy@host uptime", "Ssh9Pa55wd"),
    ("redis_cli", "redis-cli -h cache -a R3dCl1Pw ping", "R3dCl1Pw"),
    ("cookie_header", "Cookie: sessionid=k2j3h4g5f6d7s8a9; theme=dark", "k2j3h4g5f6d7s8a9"),
    ("json_in_text", 'config was {"client_secret": "Cl13ntS3cr3tV4l", "region": "eu"}', "Cl13ntS3cr3tV4l"),
    ("pgpassword", "PGPASSWORD=PgPw0rd42 psql -h db", "PgPw0rd42"),
    ("yaml_password", "db:\n  password: Yml5ecret7\n  host: db", "Yml5ecret7"),
]

CORPUS = [(name, f"{BEFORE} {leak} {AFTER}", secret) for name, leak, secret in _LEAKS]

# Ordinary text that must come through untouched.
ORDINARY = [
    "commit 3f9c2a7e8b1d4c6a9e0f2b3c4d5e6f7a8b9c0d1e merged into main",
    "request 123e4567-e89b-12d3-a456-426614174000 took 12 ms",
    "edited /home/agent/work/switchyard/config/redaction.py and sessions_app/api/fast.py",
    "see https://github.com/org/repo/pull/12 and https://docs.example.com/a/b?page=2&sort=asc",
    "password reset link sent to the user; the token expired after 15 minutes",
    "usage: input_tokens=1234 output_tokens: 456 max_tokens=4096",
    "git push -u origin feature/login && mkdir -p build/out",
    "mysql -u root -p shop   (prompts for the password)",
    "the basic functionality works; bearer authentication is next",
    "PWD=/home/agent/work OLDPWD=/tmp HOME=/home/agent",
    "ssh://git@github.com:22/org/repo.git and git@github.com:org/repo.git",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "ValueError: key 'region' not found in config (session 20261126_1200)",
    "src/components/Header/HeaderTitle/index.tsx compiled",
]
