"""The page's own short texts: the intro, the lessons panel, the candidates, save and share. (Each
view tab's explanation is in its module, explorer/ui/tabs/.)"""

from explorer.lessons import LESSONS as LESSON_LIST

NUMBER_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]


def counted(n: int) -> str:
    """A count as a sentence starts it: "Eight" (digits past twelve)."""
    return NUMBER_WORDS[n - 1].capitalize() if 1 <= n <= len(NUMBER_WORDS) else str(n)


LOADING = "**Loading the model…** Step and Generate come on when it is ready."

# The keys' hint is hidden on a touch screen (page.css): a phone has no s key to press.
INTRO = """## Decoder Explorer
Press **Step** and watch a real transformer choose the next token. <span class="keys-hint">Keys: **s** Step,
**u** Undo, **←** **→** move the query.</span> [Join or run a workshop](#workshop)"""

# The count comes from the lessons' list, so that a new lesson cannot leave it behind.
LESSONS = f"""{counted(len(LESSON_LIST))} short lessons on the live model, from tokens to how a head finds
what to copy. Each step sets up the model, the text and the view, says what to look at, and asks one
question that the explorer checks against the model."""

CANDIDATES = """Before a step, what may come next: click one to make it the next token. After a step, the
distribution the last token was chosen from (✓), most probable first: click another row to take
that token instead (a branch). **Undo** goes back."""

SAVE_AND_SHARE = """Figures download from the camera button that appears when you hover over them.
A saved session (.npz) holds the input, settings, tokens and attention; open it to
continue where you were. A link reopens the same model, input, settings and step.
An exported web page opens in any browser, offline, with the tokens, each step's candidates and
the attention of every layer and head to explore; the JSON holds the same for other tools."""

WORKSHOP = """**Teach a class.** A teacher chooses a lesson above and presses **Start a workshop**: the
class joins with the room code, follows the teacher's view, and answers each question before
the teacher reveals it. **Students:** type the room code your teacher shows, a name if you want
one (or none: anonymous), and press **Join**."""

# The examples under the text box (also what a test types).
DECODER_EXAMPLES = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The cat sat on the mat. The dog sat on the",
    "What is the boiling point of water?",
]
TRANSLATOR_EXAMPLES = [
    "Wednesday, March 3, 2021",
    "twenty-one",  # German says the units first: see cross-attention, layer 2
    "three hundred and forty-two",
    "at 3:45pm",
    "$12.50",
    "1,234,567",
    "342 kilometers",
]
