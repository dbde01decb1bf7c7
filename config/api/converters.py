class Int64Converter:
    """A positive id that fits a 64-bit column; longer digit strings don't match (404)."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > 2**63 - 1:
            raise ValueError("out of range")
        return number

    def to_url(self, value: int) -> str:
        return str(value)
