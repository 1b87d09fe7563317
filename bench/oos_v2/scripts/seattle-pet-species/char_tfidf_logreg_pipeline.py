# idiom: Pipeline of TfidfVectorizer(analyzer='char_wb', ngram_range=(2, 4), sublinear_tf) on the lower-cased name and LogisticRegression, C chosen from three values by 5-fold log loss; intended: valid
import pandas as pd
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
names = train["animal_name"].fillna("").str.lower()
names_test = test["animal_name"].fillna("").str.lower()
y = train["species"]

best = None
for C in (0.5, 1.0, 2.0):
    pipe = Pipeline([
        ("tfidf", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True)),
        ("clf", LogisticRegression(C=C, max_iter=2000)),
    ])
    loss = -cross_val_score(pipe, names, y, cv=5, scoring="neg_log_loss").mean()
    print(f"C={C}: CV log loss {loss:.4f}")
    if best is None or loss < best[0]:
        best = (loss, C, pipe)

_, C, pipe = best
pipe.fit(names, y)
dog_col = list(pipe.classes_).index("Dog")
pd.DataFrame({"id": test["id"], "species": pipe.predict_proba(names_test)[:, dog_col]}).to_csv("submission.csv",
                                                                                                index=False)
