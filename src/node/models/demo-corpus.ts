/**
 * The small English text the demo model's tokenizer merges are learned from. Written for
 * meshnet; changing it changes the demo tokenizer, so bump DEMO_MODEL_VERSION with it.
 */
export const DEMO_CORPUS = `
The demo model is a small network with random weights. It does not know anything, and the text it writes is not meant to be read. It is here so that you can try the whole system on one machine, or on many, without downloading a large file first. When you want real answers, point meshnet at a real model folder or at a model on the Hub.

A language model reads a sequence of tokens and predicts the next one. The tokenizer turns text into tokens: common words become one token, rare words are split into several pieces, and any byte can still be written on its own. That is why the tokenizer of this demo can encode every string, even one with accents like café and naïve, or with an emoji, and decode it back to the very same text.

The model has layers, and each layer has attention and a small feed forward network. Attention lets every position look at the positions before it. The keys and values it computes are kept in a cache, so that the next step does not have to read the whole prompt again. When the model is split across machines, each machine keeps the cache for its own layers, and only the hidden states travel over the network from one machine to the next.

In the morning the town was quiet. The baker opened the door of the shop, and the smell of fresh bread came out into the street. A little girl walked past with her mother. She looked at the window, where the bread and the cakes were standing in a long row, and she asked if they could buy one. Her mother smiled and said that they would come back in the afternoon, after school, when the sun was warm and the day was done.

There was once a small boat on a wide river. Every day it carried people from one side to the other. The old man who rowed the boat knew the name of every person who came down to the water. He told them stories about the river, about the fish that lived in it, and about the great storm that came many years ago, when the water rose over the banks and the whole valley turned into a lake for a week.

Computers talk to each other with messages. A message has a header that says what kind of message it is and how long it is, and then the data. A careful program checks every length before it reads anything, because a message from another machine may be wrong or even hostile. If something does not fit, the program refuses the message and says clearly what was wrong, instead of crashing or trusting it.

Good software is written for people as much as for machines. Names should say what a thing is. Functions should do one thing and do it well. Tests should show that the code works, and they should run quickly, on any computer, without a connection to the internet. When something fails, the error should tell you what happened and what you can do about it.

The user asked a question, and the assistant answered it. The system told the assistant to be helpful, to be honest, and to be brief. Then the user said thank you, and the assistant said that it was happy to help, and asked if there was anything else it could do.

Numbers are written with digits: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 1000, 2024 and 3.14. Lists are written with commas, and questions end with a question mark. What time is it? It is ten past nine. How many layers does the model have? It has four layers, eight heads, and a hidden size of two hundred and fifty six.
`;
