"""Tool calling inside a batch: the loop between model turns (`loop`), the tool servers it
calls (`http_tools`, `mcp_tools`) over one guarded HTTP transport (`transport`), and their
spans (`tool_spans`)."""
