"""Translation between OpenAI's Chat Completions shape and Anthropic's Messages shape.

Pure functions over parsed JSON (dicts and lists), both directions:

- `chat_to_anthropic`: an OpenAI chat request → an Anthropic Messages request (an
  OpenAI-shaped item run on an Anthropic upstream).
- `anthropic_to_chat`: an Anthropic Messages request → an OpenAI chat request (an
  Anthropic-shaped item run on an OpenAI-compatible upstream: vLLM, Ollama, OpenAI).
- `responses`: an Anthropic Message ↔ an OpenAI chat.completion.
- `errors`: an upstream's error body in one shape → the other shape's error object.
- `message_batches`: the checks of a Message Batches create body, per Anthropic's rules, with
  one rejection per request that cannot run (including "cannot be translated").

What one shape cannot express is never dropped without a word: it raises
`shared.Untranslatable` naming the field. The only things left out on purpose are hints that
do not change an answer (documented in each module).
"""
