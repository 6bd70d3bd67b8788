-- Turns gRPC errors into OpenAI-shaped HTTP answers for REST clients.
-- A service aborts with trailing metadata `x-oai-status` (HTTP status) and `x-oai-error`
-- (the JSON body); this filter, placed before the transcoder, rewrites the response.
-- Requests that arrived as native gRPC are left alone (their clients read the gRPC status).

function envoy_on_request(request_handle)
  local ct = request_handle:headers():get("content-type") or ""
  if string.sub(ct, 1, 16) == "application/grpc" then
    request_handle:streamInfo():dynamicMetadata():set("oai", "native_grpc", "1")
  end
end

-- Runs after the transcoder on the way out (encoder filters run in reverse order).
function envoy_on_response(response_handle)
  local md = response_handle:streamInfo():dynamicMetadata():get("oai")
  if md ~= nil and md["native_grpc"] == "1" then return end
  local h = response_handle:headers()
  local err = h:get("x-oai-error")
  if err == nil then
    h:remove("grpc-status"); h:remove("grpc-message"); h:remove("grpc-accept-encoding")
    return
  end
  h:replace(":status", h:get("x-oai-status") or "500")
  h:replace("content-type", "application/json")
  for _, k in ipairs({"x-oai-error", "x-oai-status", "grpc-status", "grpc-message", "grpc-status-details-bin"}) do
    h:remove(k)
  end
  response_handle:body(true):setBytes(err)
end
