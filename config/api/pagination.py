from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class DefaultPagination(PageNumberPagination):
    """Pages of 100 by default. ``page_size`` is a whole number from 1 to 1,000 (empty: the
    default); anything else is a 400 naming it, as the schema says, rather than silently the default."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param, "")
        if raw == "":
            return self.page_size
        if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= self.max_page_size):
            message = f"Must be a whole number from 1 to {self.max_page_size}."
            raise ValidationError({self.page_size_query_param: [message]})
        return int(raw)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size}
            elif parameter["name"] == self.page_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
        return parameters
