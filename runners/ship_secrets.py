"""The GitHub token of a repository, encrypted at rest with a key derived from SECRET_KEY (Fernet:
AES-128-CBC with an HMAC). A token read back with another SECRET_KEY is "not set", never garbage."""

import base64
from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    # Imported where a token is read or written: the admin loads this module in every Django process.
    from cryptography.fernet import Fernet


def _fernet() -> "Fernet":
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"switchyard github token").derive(
        settings.SECRET_KEY.encode()
    )
    return Fernet(base64.urlsafe_b64encode(key))


def token_encrypt(token: str) -> str:
    return _fernet().encrypt(token.encode()).decode() if token else ""


def token_decrypt(stored: str) -> str:
    if not stored:
        return ""
    from cryptography.fernet import InvalidToken

    try:
        return _fernet().decrypt(stored.encode()).decode()
    except InvalidToken:
        return ""
