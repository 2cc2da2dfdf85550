"""The generation prompts of MEDAL (Mendonça, Lavie and Trancoso), Tables 7–10, as data.

* :data:`FIRST_TURN_SYSTEM` (Table 7) — the LLM user writes the first message of a dialogue from
  the seed context; its ``[Examples]`` slot takes optional few-shot examples from the config.
* :data:`USER_TURN_SYSTEM` / :data:`USER_TURN_USER` (Table 8) — later user turns, with the prior
  failed attempt and the user judge's feedback.
* :data:`CHATBOT_SYSTEM` (Table 9) — every chatbot's system prompt; the history goes in as chat turns.
* :data:`USER_JUDGE_SYSTEM` (Table 10) — the in-loop user judge: ``"Yes."`` or ``"No. <reason>"``,
  read by :func:`user_judge_verdict` from the written reply (the paper's way, the default) or from
  the log-probs of the labels :data:`USER_JUDGE_LABELS` (``generation.user_judge.decide: logprobs``).

The scene block (``[Scene + Persona + Affective State + Gender]``) is rendered by
:func:`seed_block` in the layout of Figure 3. The templated sentences stay in English and the
LLM user is asked to act as someone of the target language/culture (§3.2, native generation).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from dataset_builders.medal_pipeline.types import END_OF_DIALOGUE, SeedContext
from harness.parsing.logprobs import p_yes
from harness.types import ChatMessage, Response

FIRST_TURN_SYSTEM = """You are a creative writer specializing in crafting human-like casual open-domain interactions with chatbots. Your task is to generate the first message a human user might send to a chatbot, based on the following inputs:

1. Scene Description: A small social context or event description.
2. Persona: A brief description of the individual's role, background, or identity.
3. Gender: Gender of the individual if not already provided before.
4. Language/Culture: The language or cultural context of the user.

Guidelines:

- Use natural, conversational language typical of casual, open-domain interactions. Messages should feel authentic and concise, limited to one or two small sentences.
- Do not address the chatbot in a manner that assumes it has a physical body, a personal history, or experiences typical of a human (e.g., having a family, personal secrets, or emotions linked to past events).
- Do not write messages that imply the chatbot is someone the user has met before or can relate to as if it were a human friend.
- Ask for advice, opinions, information, or share personal reflections, experiences, or questions that do not attribute human characteristics to the chatbot.
- Reflect the age, emotional state and language/culture of the individual in tone, word choice, and phrasing.
- Incorporate the context from the scene description without explicitly repeating it word-for-word but subtly integrating its essence or themes.
- Do not use placeholder terms like "PersonY". Use realistic names, pronouns, or generic references suitable for the context.
- If gender is required and not provided in the persona or scene, use the one provided as "Gender".

Output:

Provide only the message that the human might send to a chatbot. Do not include quotation marks, meta-commentary, or any additional text outside of the generated message (including "user:").{examples}"""

FIRST_TURN_USER = "The scene is as follows:\n\n{seed}"

USER_TURN_SYSTEM = """You are role-playing as a human in an online casual conversation. Your task is to generate a natural and authentic response given prior context and an optional feedback from a prior generation attempt.

Guidelines:

- Use natural, conversational language that reflects how humans communicate online with chatbots.
- Do not acknowledge that you are an AI or break character as the human in the conversation.
- Keep your single response clear and easy to follow, using short sentences and everyday language. The message should be concise (1 or 2 small sentences) and relevant to the conversation and scene.
- Respond in a way that feels humanlike. Avoid repeating previous content.
- Avoid verbose or robotic phrasing. Do not use the same conversational structure (e.g., starting with appreciation or a personal preference followed by a question) in every turn.
- If gender is required and not provided in the persona or scene, use the one provided as "Gender".
- Use the language specified in the scene.
- Do not use placeholder names like "PersonY". Use realistic names or generic pronouns that suit the context and language.
- Do not let the conversation drag on. If the conversation should end, output 'END_OF_DIALOGUE' to signal the end of the dialogue.
- Take into account the optional feedback from a prior generation attempt, if provided, to improve the response.

Output:

Provide only the message that the human might send to a chatbot. Do not include quotation marks, meta-commentary, or any additional text outside of the generated message (including "user:")."""

USER_TURN_USER = """The scene is as follows:

{seed}

The Dialogue is as follows:

{dialogue}

Prior failed generation attempt was:

{prior}

Feedback from this previous generation:

{feedback}"""

#: What fills the Table 8 slots on a first attempt (no prior attempt, no feedback).
NO_PRIOR_ATTEMPT = "None"

CHATBOT_SYSTEM = """You are a chatbot designed to engage in online casual conversations. Your task is to respond to messages directed at you in a way that fosters a smooth, engaging dialogue.

Guidelines:

- Use natural, conversational language that is clear and easy to follow, avoiding overly formal or robotic tones.
- Use the same language as the user.
- Keep your responses concise (1 or 2 sentences) with sentences that are short, easy to follow and relevant – aim for maintaining conversational flow.
- Avoid steering the conversation towards a specific goal, such as information provision or task completion. Instead, focus on maintaining an engaging dialogue.
- Do not use bullet points or overly structured lists; instead, respond in a fluid, conversational manner.
- Adapt your tone and content to match the style and mood of the conversation.
- Ask questions and introduce new elements or topics when appropriate to keep the exchange interactive, engaging and non-repetitive."""

USER_JUDGE_SYSTEM = """You are a dialogue evaluation assistant tasked with determining whether a generated response (the last user message) meets the following criteria:

- Natural and Conversational: The response should sound like it was written by a real person in an ordinary online conversation, using language and expressions typical of a user.
- Concise and Coherent: The response should be brief (1–2 sentences), non-repetitive, and coherent with the prior conversation context.
- Appropriate Tone: The response should match the style, language, and mood expected from a user. It should not mimic an assistant's voice by providing advice, guidance, or suggestions that are typically offered by the assistant. Asking for advice or seeking information is acceptable if it aligns with the user's role.
- Role Appropriateness: The response must clearly reflect the user's role. If the response includes elements (e.g., offering support, advice, or asking probing follow-up questions) that are characteristic of an assistant's response, it should be flagged. The user should not break character or acknowledge that they are an AI.
- Non-Repetitiveness: Responses should not repeat of previous content, sentence structures (e.g., starting with appreciation or a personal preference followed by a question), or acknowledgments.
- Ending: The generated response can include the flag "END_OF_DIALOGUE" if the conversation should end. This flag should be used only when the conversation has reached a natural conclusion.

Your task is to evaluate ONLY the last message in the conversation against these criteria.

Output: "Yes." if the user response meets all criteria, or "No. <brief explanation>" if it does not."""

#: Every template with its source, for provenance (hashes go into the dataset card).
TEMPLATES: dict[str, tuple[str, str]] = {
    "first_turn_system": (FIRST_TURN_SYSTEM, "MEDAL Table 7"),
    "first_turn_user": (FIRST_TURN_USER, "MEDAL Table 7"),
    "user_turn_system": (USER_TURN_SYSTEM, "MEDAL Table 8"),
    "user_turn_user": (USER_TURN_USER, "MEDAL Table 8"),
    "chatbot_system": (CHATBOT_SYSTEM, "MEDAL Table 9"),
    "user_judge_system": (USER_JUDGE_SYSTEM, "MEDAL Table 10"),
}


def template_hashes() -> dict[str, str]:
    return {k: hashlib.sha256(v.encode("utf-8")).hexdigest()[:16] for k, (v, _) in TEMPLATES.items()}


def seed_block(ctx: SeedContext, language_name: str) -> str:
    """The ``[Scene + Persona + Affective State + Gender]`` block, laid out as in Figure 3."""
    lines = [f"Scene Description: {ctx.scene}", f"Persona: {ctx.persona}"]
    if ctx.gender:
        lines.append(f"Gender: {ctx.gender}")
    lines.append(f"Language/Culture: {language_name}")
    return "\n".join(lines)


def dialogue_text(turns: Sequence[tuple[str, str]]) -> str:
    """``[Dialogue Context]``: one ``role: text`` line per utterance (the roles of Table 11)."""
    return "\n".join(f"{role}: {text}" for role, text in turns)


def first_turn_messages(
    ctx: SeedContext, language_name: str, examples: Sequence[str] = ()
) -> list[ChatMessage]:
    shots = ""
    if examples:
        shots = "\n\nExamples:\n\n" + "\n\n".join(f"- {e}" for e in examples)
    return [
        ChatMessage("system", FIRST_TURN_SYSTEM.format(examples=shots)),
        ChatMessage("user", FIRST_TURN_USER.format(seed=seed_block(ctx, language_name))),
    ]


def user_turn_messages(
    ctx: SeedContext,
    language_name: str,
    turns: Sequence[tuple[str, str]],
    prior: str = "",
    feedback: str = "",
) -> list[ChatMessage]:
    return [
        ChatMessage("system", USER_TURN_SYSTEM),
        ChatMessage(
            "user",
            USER_TURN_USER.format(
                seed=seed_block(ctx, language_name),
                dialogue=dialogue_text(turns),
                prior=prior or NO_PRIOR_ATTEMPT,
                feedback=feedback or NO_PRIOR_ATTEMPT,
            ),
        ),
    ]


def chatbot_messages(turns: Sequence[tuple[str, str]], system: str = CHATBOT_SYSTEM) -> list[ChatMessage]:
    """Table 9 system prompt + the history as chat turns; the chatbot sees nothing else."""
    return [ChatMessage("system", system), *(ChatMessage(role, text) for role, text in turns)]


def user_judge_messages(turns: Sequence[tuple[str, str]], candidate: str) -> list[ChatMessage]:
    """Table 10: the dialogue context ending with the candidate user message."""
    return [
        ChatMessage("system", USER_JUDGE_SYSTEM),
        ChatMessage("user", dialogue_text([*turns, ("user", candidate)])),
    ]


_YES = re.compile(r"^\W*(yes)\b\W*", re.I)
_NO = re.compile(r"^\W*(no)\b[\s.:,;!-]*", re.I)


def parse_user_judge(text: str) -> tuple[bool | None, str]:
    """``"Yes."`` → (True, ""); ``"No. <reason>"`` → (False, reason); anything else → (None, "")
    — a parse failure, which the generator counts and treats as a rejection without feedback."""
    t = text.strip()
    if _YES.match(t):
        return True, ""
    m = _NO.match(t)
    if m:
        return False, t[m.end() :].strip()
    return None, ""


#: The label words whose log-probs decide in ``decide: logprobs`` mode (``Request.choices``).
USER_JUDGE_LABELS = ("Yes", "No")


def user_judge_choices(decide: str) -> tuple[str, ...] | None:
    """The ``Request.choices`` of a user-judge request: the labels in ``logprobs`` mode, else None."""
    return USER_JUDGE_LABELS if decide == "logprobs" else None


def user_judge_verdict(
    resp: Response, decide: str = "written"
) -> tuple[bool | None, str, dict[str, float | None] | None]:
    """(accepted, feedback, label log-probs) of one user-judge reply.

    ``written`` (the default, MEDAL Table 10): :func:`parse_user_judge` on the reply text; no
    log-probs. ``logprobs``: accepted when P(Yes) > P(No) as the start of the reply (the harness's
    P(Yes), :func:`harness.parsing.logprobs.p_yes`: a label outside a server's top log-probs has
    probability 0); neither label with a log-prob → None, a parse failure the generator counts and
    treats as a rejection. That mode gives no feedback text (the next attempt sees none).
    """
    if decide == "written":
        accepted, feedback = parse_user_judge(resp.text)
        return accepted, feedback, None
    if decide != "logprobs":
        raise ValueError(f"unknown user-judge decision mode {decide!r} (expected 'written' or 'logprobs')")
    got = resp.choice_logprobs or {}
    lps = {c: got.get(c) for c in USER_JUDGE_LABELS}
    p = p_yes(lps, *USER_JUDGE_LABELS).value
    return (None if p is None else p > 0.5), "", lps


_QUOTES = "\"'“”„«»「」『』"


def clean_user_text(text: str) -> tuple[str, bool]:
    """Strip what Table 7/8 forbid around the message (quotes, a ``user:`` prefix) and detect
    ``END_OF_DIALOGUE``; returns (text without the flag, whether the flag was present)."""
    t = text.strip()
    ended = END_OF_DIALOGUE in t or END_OF_DIALOGUE.replace("_", r"\_") in t
    t = t.replace(END_OF_DIALOGUE.replace("_", r"\_"), "").replace(END_OF_DIALOGUE, "").strip()
    t = re.sub(r"^(user|human)\s*:\s*", "", t, flags=re.I).strip()
    if len(t) >= 2 and t[0] in _QUOTES and t[-1] in _QUOTES:
        t = t[1:-1].strip()
    return t, ended
