// The fixed text the tiny tokenizer's merges are learned from: plain English, chat turns and a
// little code, ASCII only. Changing it changes every generated tokenizer (and the tests that pin
// its merges); append rather than edit.
#include "models/qwen3/tiny_tokenizer.h"

namespace omnirt::models::qwen3 {

std::string_view tiny_tokenizer_corpus() {
    static constexpr std::string_view kCorpus = R"CORPUS(
system
You are a helpful assistant. Answer the user in a short and clear way.
user
What is a serving runtime for omni models?
assistant
A serving runtime takes requests from many users and runs a model for each of them. An omni model
reads text, audio, images and video, and it can answer with text and with speech. The runtime
splits the model into stages: a thinker that writes the answer, a talker that turns it into sound
codes, and a vocoder that turns the codes into a wave. Each stage can run on its own process and
on its own device, and the stages pass their results to each other as the answer is written.
user
Why split the model into stages at all?
assistant
Because the stages have different needs. The thinker is large and wants a big batch on a strong
GPU. The vocoder is small and wants to start early, so that the user hears the first words while
the rest of the answer is still being written. When every stage has its own queue and its own
scheduler, each one can be tuned on its own, and a slow stage does not block the others.
system
You are a careful engineer. Explain things step by step and give short examples.
user
How does a tokenizer work?
assistant
A tokenizer turns text into a list of numbers that the model can read. First the text is split
into words, numbers, spaces and punctuation by a regular expression. Then each piece is turned
into bytes, and the bytes are merged into larger tokens by a list of merges that was learned from
a lot of text. The merges that were learned first are applied first. Common words become a single
token, while rare words are made of several smaller tokens. At the end every token has a number,
and the model only ever sees those numbers. To go back from numbers to text, the tokens are joined
and the bytes are decoded again.
user
And what is a chat template?
assistant
A chat template is a small program that turns a list of messages into one long prompt. Each
message starts with a special token, then the role of the speaker, such as system, user or
assistant, then the content, and it ends with another special token. The model was trained on
prompts in exactly this format, so the runtime must build them the same way.
user
Can you count to twenty?
assistant
One, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve, thirteen, fourteen,
fifteen, sixteen, seventeen, eighteen, nineteen, twenty. In digits: 1 2 3 4 5 6 7 8 9 10 11 12
13 14 15 16 17 18 19 20. The year 2025 has 365 days, and a day has 24 hours of 60 minutes.
user
Tell me a short story about a small robot.
assistant
There was once a small robot who lived in a quiet house at the end of a long road. Every morning
the robot opened the windows, watered the plants and made tea for the old woman who lived there.
She told the robot stories about the sea, about ships and storms and the people she had met. One
day the robot asked if it could see the sea for itself. The woman smiled, packed a small bag, and
the two of them walked down the road together. When they reached the water the robot stood still
for a long time, listening to the waves, and then it said that the stories had been true.
user
What should a good error message say?
assistant
A good error message says what went wrong, where it went wrong and what the user can do about it.
It names the file, the line and the field. It does not only say that something failed; it says
which value was wrong and which values would have been accepted. The user should be able to fix
the problem without reading the source code.
system
You are a helpful assistant that writes code.
user
Write a function that adds two numbers in Python.
assistant
def add(first, second):
    """Return the sum of two numbers."""
    return first + second


def main():
    values = [1, 2, 3, 4]
    total = 0
    for value in values:
        total = add(total, value)
    print("total:", total)


if __name__ == "__main__":
    main()
user
Now write the same thing in C++.
assistant
#include <iostream>
#include <vector>

int add(int first, int second) { return first + second; }

int main() {
    std::vector<int> values = {1, 2, 3, 4};
    int total = 0;
    for (int value : values) {
        total = add(total, value);
    }
    std::cout << "total: " << total << std::endl;
    return 0;
}
user
How is a model checkpoint stored?
assistant
A checkpoint is a directory. The file config.json holds the size of the model: the number of
layers, the hidden size, the number of attention heads and the size of the vocabulary. The weights
are stored in safetensors files. Each file starts with a small header in JSON that gives the name,
the type and the shape of every tensor and where its bytes are in the file. Large models split
their weights over several files, and an index file says which tensor is in which file. Because
the header says where every tensor is, the runtime can map the file into memory and use the
tensors without copying them.
user
What is attention?
assistant
Attention lets every token look at the tokens before it. For each token the model computes a
query, a key and a value. The query of a token is compared with the keys of all earlier tokens,
and the scores say how much of each value to take. The results of several heads are joined and
projected back to the hidden size. To make this fast during generation, the keys and values of
earlier tokens are kept in a cache, so each new token only computes its own query, key and value.
user
What is a mixture of experts?
assistant
In a mixture of experts layer, a small router looks at each token and picks a few experts out of
many. Only the chosen experts run for that token, and their outputs are added with the weights the
router gave them. The model can then have many more parameters than it uses for any one token,
which makes it both large and fast.
user
Thank you, that was helpful.
assistant
You are welcome. If you have more questions about the runtime, the model or the tokenizer, just
ask, and I will do my best to help.
user
Please summarize the following text in one sentence: The weather was cold and wet for the whole
week, but on Sunday the sun came out and the children played in the park until the evening.
assistant
After a cold and wet week, the sun came out on Sunday and the children played in the park.
user
Translate "good morning" into French and German.
assistant
In French it is "bonjour", and in German it is "guten Morgen".
user
Give me a list of three colors.
assistant
1. red
2. green
3. blue
user
What is the capital of France?
assistant
The capital of France is Paris.
user
How many legs does a spider have?
assistant
A spider has eight legs.
user
Is the number 17 a prime number?
assistant
Yes. 17 is a prime number, because it can only be divided by 1 and by itself.
user
What time is it when the clock shows 14:30?
assistant
It is half past two in the afternoon.
system
You are a friendly assistant. Keep every answer under three sentences.
user
Why is the sky blue?
assistant
Sunlight is made of many colors, and the air scatters blue light much more than red light. That
scattered blue light reaches our eyes from every part of the sky, so the sky looks blue.
user
What does a compiler do?
assistant
A compiler reads the source code of a program and translates it into machine code that the
computer can run. It also checks the code for errors and tells the programmer where they are.
user
Write a JSON object with a name and an age.
assistant
{"name": "Alice", "age": 30, "city": "London", "tags": ["reader", "runner"]}
user
What is the difference between a process and a thread?
assistant
A process has its own memory, while the threads of one process share the same memory. Threads
are cheaper to start and can talk to each other directly, but they must be careful when they
change the same data at the same time.
user
Write a shell command that counts the lines of every file in a directory.
assistant
for file in *.txt; do
    wc -l "$file"
done
user
What is the square root of 144?
assistant
The square root of 144 is 12, because 12 * 12 = 144.
)CORPUS";
    return kCorpus;
}

}  // namespace omnirt::models::qwen3
