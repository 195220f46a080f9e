"""dcalign_client: a Python client of dcalign-server, the analyst's gRPC service of a Data
Collaboration (proto/dcalign/service/v1/analyst.proto). See README.md."""
from .client import Client, ServiceError, UploadResult, matrix_bytes, read_token_file

__all__ = ["Client", "ServiceError", "UploadResult", "matrix_bytes", "read_token_file"]
__version__ = "0.1.0"
