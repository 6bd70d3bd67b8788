-- Turns gRPC errors into OpenAI-shaped HTTP answers for REST clients (Anthropic-shaped ones
-- on the Message Batches routes, /v1/messages/...).
-- A service aborts with trailing metadata `x-oai-status` (HTTP status) and `x-oai-error`
-- (the JSON body); this filter, placed before the transcoder, rewrites the response.
-- On the way in it hands a REST request's query string to the services as the `x-oai-query`
-- header, so the transcoder binds path parameters only: the services decode the query
-- against the request message themselves (services/common/rest_input.py), with OpenAI's
-- error wording, where the transcoder would answer in its own words.
-- On the Message Batches routes it also passes the request's own scheme and Host as
-- `x-bg-origin`, so a batch's `results_url` can point back at this gateway.
-- Requests that arrived as native gRPC are left alone (their clients read the gRPC status).
-- A body may come gzip-compressed (`Content-Encoding: gzip`, inflated by Envoy's decompressor
-- filter); any other coding is 415 `unsupported_content_encoding`.
-- MAX_JSON_BODY_BYTES, MAX_MESSAGE_BATCH_BYTES and the *_MESSAGE texts are defined by
-- gateway/render.py above this text.

local function json_string(s)
  s = string.gsub(s, '[%c"\\]', function(c) return string.format("\\u%04x", string.byte(c)) end)
  return '"' .. s .. '"'
end

local function envelope(message, error_type, code)
  return '{"error":{"message":' .. json_string(message) .. ',"type":"' .. error_type ..
    '","param":null,"code":"' .. code .. '"}}'
end

-- Anthropic's error types by HTTP status (services/common/translate/errors.py).
local ANTHROPIC_TYPES = {["400"] = "invalid_request_error", ["401"] = "authentication_error",
  ["402"] = "billing_error", ["403"] = "permission_error", ["404"] = "not_found_error",
  ["409"] = "conflict_error", ["413"] = "request_too_large", ["429"] = "rate_limit_error",
  ["500"] = "api_error", ["504"] = "timeout_error", ["529"] = "overloaded_error"}

local function anthropic_envelope(status, message)
  local error_type = ANTHROPIC_TYPES[status]
  if error_type == nil then
    if tonumber(status) < 500 then error_type = "invalid_request_error" else error_type = "api_error" end
  end
  return '{"type":"error","error":{"type":"' .. error_type .. '","message":' .. json_string(message) .. '}}'
end

local function is_anthropic_path(path)
  return path == "/v1/messages" or string.sub(path, 1, 13) == "/v1/messages/"
end

local function is_anthropic(handle)
  local md = handle:streamInfo():dynamicMetadata():get("oai")
  return md ~= nil and md["anthropic"] == "1"
end

local function is_upload(headers)
  local path = string.match(headers:get(":path") or "", "^[^?]*")
  return headers:get(":method") == "POST" and (path == "/v1/files" or path == "/v1/files/")
end

local function refuse(request_handle, status, message, code)
  request_handle:headers():add("x-oai-local-reply", "1")  -- local_reply_config passes it through
  local body = envelope(message, "invalid_request_error", code)
  if is_anthropic(request_handle) then body = anthropic_envelope(status, message) end
  request_handle:respond({[":status"] = status, ["content-type"] = "application/json"}, body)
end

-- Request side: remember native gRPC calls; move the query string to `x-oai-query`; refuse
-- bodies on GET and DELETE (nothing would read them) and JSON bodies above the limit before
-- they are transcoded (uploads stream and are capped by the ingest service itself).
function envoy_on_request(request_handle)
  local h = request_handle:headers()
  local ct = h:get("content-type") or ""
  if string.sub(ct, 1, 16) == "application/grpc" then
    request_handle:streamInfo():dynamicMetadata():set("oai", "native_grpc", "1")
    return
  end
  h:remove("x-oai-query")
  -- The method as the client sent it, for Envoy's span (tracing.py): the transcoder makes
  -- every call a POST before the span reads the request's headers.
  h:replace("x-oai-method", h:get(":method") or "")
  local bare, query = string.match(h:get(":path") or "", "^([^?]*)%?(.*)$")
  if bare ~= nil then
    h:replace(":path", bare)
    if query ~= "" then h:add("x-oai-query", query) end
  end
  if is_anthropic_path(bare or h:get(":path") or "") then
    request_handle:streamInfo():dynamicMetadata():set("oai", "anthropic", "1")
    local scheme = h:get("x-forwarded-proto") or h:get(":scheme") or "http"
    h:remove("x-bg-origin")
    h:add("x-bg-origin", scheme .. "://" .. (h:get(":authority") or ""))
  end
  -- gzip bodies are inflated by the decompressor filter after this one; another coding would
  -- reach the transcoder as is and read as broken JSON.
  local coding = string.lower(string.match(h:get("content-encoding") or "", "^%s*(.-)%s*$"))
  if coding ~= "" and coding ~= "gzip" and coding ~= "identity" then
    refuse(request_handle, "415", "Content-Encoding '" .. string.sub(coding, 1, 40) ..
      "' is not supported; send the body as is or gzip-compressed.", "unsupported_content_encoding")
    return
  end
  local method = h:get(":method")
  local length = tonumber(h:get("content-length") or "")
  local has_body = (length ~= nil and length > 0) or h:get("transfer-encoding") ~= nil
  h:remove("x-oai-gzip")
  if coding == "gzip" and has_body then h:add("x-oai-gzip", "1") end  -- rest_input.GZIP_METADATA_KEY
  if (method == "GET" or method == "HEAD" or method == "DELETE") and has_body then
    refuse(request_handle, "400", method .. " requests take no body; pass parameters in the query string.",
      "body_not_allowed")
    return
  end
  -- HEAD is GET without the body (RFC 9110): routed as GET; Envoy sends the answer's headers
  -- only, since the request it received was a HEAD.
  if method == "HEAD" then h:replace(":method", "GET") end
  if is_anthropic(request_handle) then
    if length ~= nil and length > MAX_MESSAGE_BATCH_BYTES then
      refuse(request_handle, "413", string.format("The request body is %d bytes; the limit is %d bytes.",
        length, MAX_MESSAGE_BATCH_BYTES), "request_too_large")
    end
    return
  end
  if length ~= nil and length > MAX_JSON_BODY_BYTES and not is_upload(h) then
    refuse(request_handle, "413", string.format(
      "The request body is %d bytes; the limit is %d bytes. Upload large inputs with POST /v1/files.",
      length, MAX_JSON_BODY_BYTES), "request_too_large")
  end
end

-- A 5xx without the API's envelope, in the words and codes of Envoy's own 5xx (local_reply_config
-- in envoy.yaml.tmpl): its grpc-message is a library's or an uncaught exception's text ("Unexpected
-- <class ...>"), nothing a client can act on. Anthropic's 503 is 529 overloaded_error, as the
-- services answer it (services/common/anthropic_errors.py).
local function server_failure(status, anthropic)
  local message, code = SERVER_ERROR_MESSAGE, "server_error"
  if status == 503 then
    message, code = UNAVAILABLE_MESSAGE, "service_unavailable"
    if anthropic then status = 529 end
  elseif status == 504 then
    message, code = TIMEOUT_MESSAGE, "service_timeout"
  end
  if anthropic then return tostring(status), anthropic_envelope(tostring(status), message) end
  return tostring(status), envelope(message, "server_error", code)
end

-- gRPC errors that carry no OpenAI body (raised by the gRPC library, not by our handlers).
local function fallback(h, grpc_status, anthropic)
  local message = string.gsub(h:get("grpc-message") or "", "%%(%x%x)",
    function(hex) return string.char(tonumber(hex, 16)) end)
  if grpc_status == "8" and string.find(message, "larger than max", 1, true) then
    if anthropic then return "413", anthropic_envelope("413", "The request is too large: " .. message) end
    return "413", envelope("The request is too large: " .. message, "invalid_request_error", "request_too_large")
  end
  local status = tonumber(h:get(":status") or "500") or 500
  if status < 400 or status >= 500 or grpc_status == "2" then  -- UNKNOWN is always the server's failure
    if status < 500 then status = 500 end
    return server_failure(status, anthropic)
  end
  if anthropic then return tostring(status), anthropic_envelope(tostring(status), message) end
  local error_type = "invalid_request_error"
  if status == 429 then error_type = "rate_limit_error" end
  return tostring(status), envelope(message, error_type, "grpc_status_" .. grpc_status)
end

-- Runs after the transcoder on the way out (encoder filters run in reverse order).
function envoy_on_response(response_handle)
  local md = response_handle:streamInfo():dynamicMetadata():get("oai")
  if md ~= nil and md["native_grpc"] == "1" then return end
  local h = response_handle:headers()
  local err = h:get("x-oai-error")
  local status = h:get("x-oai-status")
  local grpc_status = h:get("grpc-status")
  if err == nil and grpc_status ~= nil and grpc_status ~= "0" then
    status, err = fallback(h, grpc_status, md ~= nil and md["anthropic"] == "1")
  end
  if err == nil then
    h:remove("grpc-status"); h:remove("grpc-message"); h:remove("grpc-accept-encoding")
    return
  end
  h:replace(":status", status or "500")
  h:replace("content-type", "application/json")
  for _, k in ipairs({"x-oai-error", "x-oai-status", "grpc-status", "grpc-message", "grpc-status-details-bin"}) do
    h:remove(k)
  end
  response_handle:body(true):setBytes(err)
end
